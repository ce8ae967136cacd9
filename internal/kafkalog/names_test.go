package kafkalog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileNames(t *testing.T) {
	if got := FileName(206, LogSuffix); got != "00000000000000000206.log" {
		t.Fatalf("FileName = %q", got)
	}
	for name, want := range map[string]SegmentFile{
		"00000000000000000206.log":           {206, LogSuffix, true, ""},
		"00000000000000000000.timeindex":     {0, TimeIndexSuffix, true, ""},
		"00000000000000023138.snapshot":      {23138, SnapshotSuffix, true, ""},
		"00000000000000000412.index.deleted": {412, IndexSuffix, false, DeletedSuffix},
		"00000000000000000412.log.cleaned":   {412, LogSuffix, false, CleanedSuffix},
		"00000000000000000412.txnindex.swap": {412, TxnIndexSuffix, false, SwapSuffix},
	} {
		got, ok := ParseFileName(name)
		if !ok || got != want {
			t.Errorf("ParseFileName(%q) = %+v %v, want %+v", name, got, ok, want)
		}
	}
	for _, bad := range []string{"leader-epoch-checkpoint", "0000000000000000206.log", "000000000000000002060.log",
		"0000000000000000020a.log", "00000000000000000206.txt", "00000000000000000206.log.broken", "99999999999999999999.log"} {
		if f, ok := ParseFileName(bad); ok {
			t.Errorf("ParseFileName(%q) accepted: %+v", bad, f)
		}
	}
}

func TestPartitionDirs(t *testing.T) {
	for name, want := range map[string]TopicPartition{
		"orders-3":                 {"orders", 3},
		"__consumer_offsets-36":    {"__consumer_offsets", 36},
		"topic-logx-001-2":         {"topic-logx-001", 2},
		"Retry.TestTopicPatient-0": {"Retry.TestTopicPatient", 0},
	} {
		got, ok := ParsePartitionDir(name)
		if !ok || got != want || got.String() != name {
			t.Errorf("ParsePartitionDir(%q) = %+v %v", name, got, ok)
		}
	}
	for _, bad := range []string{"test-topic-0.2308294e39dc4a44ab8183f587805af2-delete", "t-0.abc-future", "t-0.abc-stray",
		"orders", "-3", "orders-", "bad topic-1", "orders-99999999999", "..-1"} {
		if tp, ok := ParsePartitionDir(bad); ok {
			t.Errorf("ParsePartitionDir(%q) accepted: %+v", bad, tp)
		}
	}
}

func TestDeletedPartitionDirs(t *testing.T) {
	tp, ok := ParseDeletedPartitionDir("test-topic-0.2308294e39dc4a44ab8183f587805af2-delete")
	if !ok || tp != (TopicPartition{"test-topic", 0}) {
		t.Fatalf("%+v %v", tp, ok)
	}
	for _, kind := range []string{"delete", "future", "stray"} {
		tp, k, ok := ParseNonLivePartitionDir("orders-3.2308294e39dc4a44ab8183f587805af2-" + kind)
		if !ok || k != kind || tp != (TopicPartition{"orders", 3}) {
			t.Errorf("%s: %+v %q %v", kind, tp, k, ok)
		}
	}
	for _, bad := range []string{"orders-0", "orders-0.abc-delete", "orders-0.2308294e39dc4a44ab8183f587805af2-moved", "orders-0-delete"} {
		if _, ok := ParseDeletedPartitionDir(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCorruptionError(t *testing.T) {
	err := WithFile(Corruptf(17, "bad %s", "thing"), "/x/00.log")
	var ce *CorruptionError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.File != "/x/00.log" || ce.Position != 17 {
		t.Fatalf("%v", err)
	}
	if err.Error() != "/x/00.log: corrupt data at byte 17: bad thing" {
		t.Errorf("message %q", err.Error())
	}
	plain := errors.New("io")
	if WithFile(plain, "f") != plain {
		t.Error("WithFile changed a non-corruption error")
	}
}

// partition.metadata is checked as Kafka reads it; anything else is an
// error that names the rule, never a topic id.
func TestParsePartitionMetadata(t *testing.T) {
	good := map[string]string{
		"version: 0\ntopic_id: 4zeO1mdxSb69f7lqENDdVA":       "4zeO1mdxSb69f7lqENDdVA",
		"version: 0\ntopic_id: 4zeO1mdxSb69f7lqENDdVA\n":     "4zeO1mdxSb69f7lqENDdVA",
		"version: 0\r\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\r\n": "AAAAAAAAAAAAAAAAAAAAAQ",
	}
	for in, want := range good {
		if got, err := ParsePartitionMetadata([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{
		"", "\n", "version: 0\n", "version: 0\ntopic_id: 4zeO1mdxSb69f7lqENDd", // truncated id
		"version: 1\ntopic_id: 4zeO1mdxSb69f7lqENDdVA", // wrong version
		"version:0\ntopic_id: 4zeO1mdxSb69f7lqENDdVA",  // Kafka splits on ":\s+"
		"version: 0\ntopic_id: 4zeO1mdxSb69f7lqENDdVA\nextra: 1",
		"version: 0\ntopic: 4zeO1mdxSb69f7lqENDdVA",
		"version: 0\ntopic_id: 4zeO1mdxSb69f7lqENDd+A", // not URL-safe base64
		"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", // the zero Uuid
		"version: 0\ntopic_id: 4zeO1mdxSb69f7lqENDdVAxx",
	} {
		if got, err := ParsePartitionMetadata([]byte(bad)); !errors.Is(err, ErrBadPartitionMetadata) {
			t.Errorf("%q: %q, %v; want ErrBadPartitionMetadata", bad, got, err)
		}
	}
}

// TestListSegmentDir: live .log files come back by base offset (not by
// name order of other files), symlinked ones as their targets, not-live
// .log files apart, a .deleted file of any kind is noticed, other names
// are ignored, and a live segment name that is not a regular file is an
// error.
func TestListSegmentDir(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"00000000000000000412.log", "00000000000000000000.log", "00000000000000000206.log",
		"00000000000000000206.index", "00000000000000000100.log.swap", "00000000000000000050.index.deleted",
		"leader-epoch-checkpoint", "00000000000000000300.log.broken"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "00000000000000000412.log"), filepath.Join(dir, "00000000000000000600.log")); err != nil {
		t.Fatal(err)
	}
	d, err := ListSegmentDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, f := range d.Segments {
		bases = append(bases, f.BaseOffset)
		if f.Info.Size() != int64(len(f.Name)) || f.Path(dir) != filepath.Join(dir, f.Name) {
			t.Errorf("%s: size %d, path %s", f.Name, f.Info.Size(), f.Path(dir))
		}
	}
	if last := d.Segments[len(d.Segments)-1]; last.Info.Size() != int64(len("00000000000000000412.log")) {
		t.Errorf("a symlink to a segment file counts as its target: size %d", last.Info.Size())
	}
	if fmt.Sprint(bases) != "[0 206 412 600]" || len(d.NotLive) != 1 || d.NotLive[0].Pending != SwapSuffix || !d.Deleted {
		t.Fatalf("listing %v, not live %+v, deleted %v", bases, d.NotLive, d.Deleted)
	}
	if _, err := ListSegmentDir(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing dir: %v", err)
	}
	// A live segment name that is not a regular file refuses the whole
	// directory: it would move the active segment and the rolled ones' ends.
	for name, make := range map[string]func(string) error{
		"a directory":              func(p string) error { return os.Mkdir(p, 0o755) },
		"a dangling symlink":       func(p string) error { return os.Symlink(filepath.Join(dir, "nothing"), p) },
		"a symlink to a directory": func(p string) error { return os.Symlink(t.TempDir(), p) },
	} {
		p := filepath.Join(dir, "00000000000000009999.log")
		if err := make(p); err != nil {
			t.Fatal(err)
		}
		if _, err := ListSegmentDir(dir); !errors.Is(err, ErrNotSegmentFile) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s named like a segment: %v, want ErrNotSegmentFile naming it", name, err)
		}
		os.Remove(p)
	}
}
