package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/remotelog"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/proto/tierdpb"
)

// TestKeysNew: a new KEK file is 64 hex digits, mode 0600; an existing
// file is never overwritten.
func TestKeysNew(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kek")
	if code, out, errOut := runCmd("keys", "new", p); code != 0 || !strings.Contains(out, "wrote a new key-encryption key to "+p) {
		t.Fatalf("keys new: exit %d\n%s%s", code, out, errOut)
	}
	data, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if len(bytes.TrimSpace(data)) != 64 || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %q, mode %v", data, st.Mode())
	}
	if code, _, errOut := runCmd("keys", "new", p); code != 1 || !strings.Contains(errOut, "exists") {
		t.Fatalf("keys new over an existing file: exit %d: %s", code, errOut)
	}
	if again, _ := os.ReadFile(p); !bytes.Equal(again, data) {
		t.Fatal("the existing key file was changed")
	}
	if code, _, _ := runCmd("keys"); code != 2 {
		t.Errorf("keys without a verb: exit %d", code)
	}
}

// withObjects writes a copy of the config at base with an objects:
// section appended.
func withObjects(t *testing.T, base, objects string) string {
	t.Helper()
	data, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tierd.yaml")
	if err := os.WriteFile(p, append(data, []byte("objects:\n"+objects)...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEncryptedTieringAndRewrap: the daemon tiers a partition compressed
// and encrypted under KEK k1 (the stored .log holds none of the records'
// bytes) and serves its old offsets; "tierd keys rewrap" moves the copies
// to k2 and says k1 can go; with k2 alone the daemon serves them again
// and "tierd verify" passes; without keys verify fails naming k2.
func TestEncryptedTieringAndRewrap(t *testing.T) {
	root := t.TempDir()
	writePartition(t, filepath.Join(root, "logs", "orders-2"), 600, 0)
	k1, k2 := filepath.Join(root, "k1.key"), filepath.Join(root, "k2.key")
	for _, p := range []string{k1, k2} {
		if code, _, errOut := runCmd("keys", "new", p); code != 0 {
			t.Fatal(errOut)
		}
	}
	fetchAddr := freeAddr(t)
	base := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), fetchAddr, "")
	form := "  chunk.size: 65536\n  compression.enabled: true\n  encryption.enabled: true\n"
	cfg1 := withObjects(t, base, form+fmt.Sprintf("  encryption.keys:\n    k1: %s\n", k1))
	ctx := context.Background()
	fetch300 := func(stop func() error) {
		t.Helper()
		c, err := grpcapi.Dial(fetchAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		testtools.WaitFor(t, "orders-2 tiered to offset 411", func() bool {
			resp, err := c.API().ListSegments(ctx, &tierdpb.ListSegmentsRequest{Topic: "orders", Partition: 2})
			return err == nil && resp.HighestTieredOffset == 411
		})
		resp, err := c.API().Fetch(ctx, &tierdpb.FetchRequest{Topic: "orders", Partition: 2, Offset: 300, MaxBytes: 1})
		if err != nil || !bytes.Contains(resp.Records, demoValue(300)[:20]) {
			t.Fatalf("fetch 300: %v", err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	fetch300(startServe(t, cfg1))

	logs, _ := filepath.Glob(filepath.Join(root, "bucket", "orders-2", "*.log"))
	manifests, _ := filepath.Glob(filepath.Join(root, "bucket", "orders-2", "*.manifest.json"))
	if len(logs) != 2 || len(manifests) != 2 {
		t.Fatalf("bucket holds %v, %v", logs, manifests)
	}
	for _, p := range logs {
		data, _ := os.ReadFile(p)
		if bytes.Contains(data, demoValue(300)[:16]) || bytes.Contains(data, demoValue(5)[:16]) {
			t.Fatalf("%s holds the records' bytes", p)
		}
	}
	for _, p := range manifests {
		if data, _ := os.ReadFile(p); !bytes.Contains(data, []byte(`"kekId": "k1"`)) || !bytes.Contains(data, []byte(`"mac"`)) {
			t.Fatalf("%s is not wrapped by k1:\n%s", p, data)
		}
	}

	code, out, errOut := runCmd("segments", "--config", cfg1)
	if code != 0 || strings.Count(out, "COPY_SEGMENT_FINISHED  chunked+enc ") != 2 {
		t.Fatalf("segments: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd("status", "--config", cfg1)
	if code != 0 || !strings.Contains(out, " stored, all chunked, all encrypted)") {
		t.Errorf("status: exit %d\n%s%s", code, out, errOut)
	}

	cfg12 := withObjects(t, base, form+fmt.Sprintf("  encryption.key.id: k2\n  encryption.keys:\n    k1: %s\n    k2: %s\n", k1, k2))
	code, out, errOut = runCmd("keys", "rewrap", "--config", cfg12, "--dry-run")
	if code != 0 || !strings.Contains(out, "before k1 2; after a rewrap k2 2") || !strings.Contains(out, "would move 2 copies to k2") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	for _, p := range manifests {
		if data, _ := os.ReadFile(p); !bytes.Contains(data, []byte(`"kekId": "k1"`)) {
			t.Fatal("a dry run wrote")
		}
	}
	code, out, errOut = runCmd("keys", "rewrap", "--config", cfg12)
	if code != 0 || !strings.Contains(out, "moved 2 copies to k2") || !strings.Contains(out, "no copy is wrapped by k1 any more") {
		t.Fatalf("rewrap: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCmd("keys", "rewrap", "--config", cfg12); code != 0 || !strings.Contains(out, "moved 0 copies") {
		t.Fatalf("second rewrap: exit %d\n%s", code, out)
	}

	cfg2 := withObjects(t, base, form+fmt.Sprintf("  encryption.keys:\n    k2: %s\n", k2))
	fetch300(startServe(t, cfg2))
	if code, out, errOut := runCmd("verify", "--config", cfg2); code != 0 || !strings.Contains(out, "2 ok, 0 mismatched") {
		t.Fatalf("verify with k2: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCmd("verify", "--config", base); code != 1 || !strings.Contains(out+errOut, `"k2"`) {
		t.Fatalf("verify without keys: exit %d\n%s%s", code, out, errOut)
	}
	// A byte flipped in a sealed chunk of one .log: that copy mismatches.
	data, _ := os.ReadFile(logs[0])
	data[len(data)/2] ^= 0x10
	os.WriteFile(logs[0], data, 0o644)
	if code, out, errOut := runCmd("verify", "--config", cfg2); code != 1 || !strings.Contains(out, "1 ok, 1 mismatched") || !strings.Contains(out, "MISMATCH orders-2") {
		t.Fatalf("verify of a damaged chunk: exit %d\n%s%s", code, out, errOut)
	}
}

// TestDumpRefusesChunked: a chunked copy's .log, downloaded with its
// manifest beside it, is refused as chunks, not reported as corrupt.
func TestDumpRefusesChunked(t *testing.T) {
	dir := t.TempDir()
	stem := filepath.Join(dir, "00000000000000000206-"+remotelog.NewSegmentID().String())
	os.WriteFile(stem+".log", bytes.Repeat([]byte{0xd5}, 300), 0o644)
	os.WriteFile(stem+".manifest.json", []byte(`{"formatVersion": 3}`), 0o644)
	if code, _, errOut := runCmd("dump", stem+".log"); code != 1 || !strings.Contains(errOut, "the copy is in chunked form") {
		t.Fatalf("dump: exit %d: %s", code, errOut)
	}
	os.WriteFile(stem+".manifest.json", []byte(`{"formatVersion": 2}`), 0o644)
	if _, _, errOut := runCmd("dump", stem+".log"); strings.Contains(errOut, "chunked form") {
		t.Fatalf("a plain copy's object called chunked: %s", errOut)
	}
}
