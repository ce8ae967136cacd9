package rsmapi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

func TestCheckPrefix(t *testing.T) {
	for p, want := range map[string]string{
		DefaultPrefix: "", "_broker-rsm": "", "kafka.rsm": "",
		"":             "required",
		"orders-0":     "partition directory",
		"_kafka-7":     "partition directory",
		"_instances":   "tierd's own",
		"_Tierd_Probe": "tierd's own",
		"a/b":          "one path element",
		"..":           "not a name",
		"x y":          "one path element",
	} {
		err := CheckPrefix(p)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckPrefix(%q) = %v; want an error saying %q", p, err, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("the defaults (disabled): %v", err)
	}
	c := DefaultConfig()
	c.Enabled = true
	err := c.Validate()
	for _, want := range []string{"token_file is required", "log_dirs is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("enabled without settings: %v; want %q", err, want)
		}
	}
	c.TokenFile, c.LogDirs = "/etc/tierd/rsm.token", []string{"/var/lib/kafka/data"}
	if err := c.Validate(); err != nil {
		t.Errorf("enabled with a token file and log dirs: %v", err)
	}
	bad := c
	bad.MaxConcurrentCopies, bad.CopyTimeout, bad.Listen, bad.LogDirs, bad.StagingDir = 0, 0, "nohost", []string{"relative"}, "rel"
	err = bad.Validate()
	for _, want := range []string{"max_concurrent_copies", "copy_timeout", "listen", "absolute path", "staging_dir"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad settings: %v; want %q", err, want)
		}
	}
}

func TestOverlap(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	os.MkdirAll(a, 0o755)
	os.MkdirAll(b, 0o755)
	link := filepath.Join(root, "link")
	os.Symlink(a, link)
	for _, tc := range []struct {
		x, y []string
		bad  bool
	}{
		{[]string{a}, []string{b}, false},
		{[]string{a}, []string{a + "/"}, true},
		{[]string{a}, []string{filepath.Join(a, "sub")}, true},
		{[]string{filepath.Join(a, "sub")}, []string{a}, true},
		{[]string{link}, []string{a}, true},
		{[]string{a + "x"}, []string{a}, false},
	} {
		if err := Overlap(tc.x, tc.y); (err != nil) != tc.bad {
			t.Errorf("Overlap(%v, %v) = %v; want an error: %v", tc.x, tc.y, err, tc.bad)
		}
	}
}

func TestReadTokenModes(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	os.WriteFile(p, []byte("abcdefghijklmnopqrstuvwxyz\n"), 0o640)
	if tok, err := ReadToken(p); err != nil || tok != "abcdefghijklmnopqrstuvwxyz" {
		t.Errorf("ReadToken of a 0640 file: %q, %v", tok, err)
	}
	for _, mode := range []os.FileMode{0o604, 0o602, 0o666} {
		os.Chmod(p, mode)
		if _, err := ReadToken(p); err == nil || !strings.Contains(err.Error(), "chmod o-rwx") {
			t.Errorf("ReadToken of a %04o file: %v; want a refusal saying how to fix it", mode, err)
		}
	}
	if _, err := ReadToken(dir); err == nil {
		t.Error("ReadToken of a directory: no error")
	}
}

// TestTierdNeverMeetsBrokerPrefix: tierd's own Manager over the same
// bucket (the copier's, retention's, sweeps' and rebuilds' view) lists no
// partition under the broker prefix, and sweeping or aborting the uploads
// of its partitions, even one of the same name, leaves every broker-owned
// object, with or without a bucket prefix.
func TestTierdNeverMeetsBrokerPrefix(t *testing.T) {
	for _, bucketPrefix := range []string{"", "p"} {
		r := newRig(t, withBackends(newMemCatalogue(), newMemStorage(BrokerPrefix(bucketPrefix, DefaultPrefix))))
		r.mem, r.mcat = r.st.(*memStorage), r.cat.(*memCatalogue)
		tp := remotelog.TopicPartition{Topic: "orders", Partition: 0}
		s := r.layout(fixSmall, tp)
		r.copy(s)
		before := r.keys()
		own, err := rsm.NewManager(r.mem.b, rsm.Config{Prefix: bucketPrefix})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if tps, err := own.Partitions(ctx); err != nil || len(tps) != 0 {
			t.Errorf("bucket prefix %q: tierd's own Manager lists %v (%v) among its partitions", bucketPrefix, tps, err)
		}
		if n, err := own.SweepPartition(ctx, tp, func(remotelog.SegmentID, bool) bool { return false }); err != nil || n != 0 {
			t.Errorf("bucket prefix %q: a sweep of tierd's %s deleted %d (%v)", bucketPrefix, tp, n, err)
		}
		if mfs, err := own.Manifests(ctx, tp); err != nil || len(mfs) != 0 {
			t.Errorf("bucket prefix %q: tierd's own manifests of %s: %d, %v", bucketPrefix, tp, len(mfs), err)
		}
		if after := r.keys(); len(after) != len(before) {
			t.Errorf("bucket prefix %q: broker-owned objects %v became %v", bucketPrefix, before, after)
		}
	}
}
