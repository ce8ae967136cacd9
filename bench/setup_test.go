package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// TestRunRefusesTakenPrefix: a run whose own prefix already holds an
// object stops before it writes anything, locally or in the bucket, and
// says why.
func TestRunRefusesTakenPrefix(t *testing.T) {
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "shared")
	mcfg := minio.DefaultConfig()
	mcfg.Endpoint, mcfg.Bucket, mcfg.Insecure = srv.Endpoint, "shared", true
	b, err := minio.New(mcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := "lab/tierd-bench-taken/bench-0/00000000000000000000-AAAAAAAAAAAAAAAAAAAAAA.log"
	if err := b.Upload(context.Background(), key, strings.NewReader("someone's"), -1); err != nil {
		t.Fatal(err)
	}
	before := rsmtest.Snapshot(t, b, "")
	cfg := DefaultConfig()
	cfg.S3Endpoint, cfg.Bucket, cfg.Prefix, cfg.runID = "http://"+srv.Endpoint, "shared", "lab", "taken"
	cfg.SegmentBytes, cfg.TotalBytes, cfg.Count, cfg.Readers = 1<<20, 2<<20, 1, 1
	cfg.Dir = t.TempDir()
	var progress bytes.Buffer
	_, err = Run(context.Background(), cfg, &progress)
	if !errors.Is(err, rsm.ErrPrefixNotEmpty) || !strings.Contains(err.Error(), key) {
		t.Fatalf("Run on a taken prefix: %v\n%s", err, progress.String())
	}
	if d := rsmtest.Diff(before, rsmtest.Snapshot(t, b, "")); d != "" {
		t.Errorf("the refused run changed the bucket:\n%s", d)
	}
	if ents, _ := os.ReadDir(cfg.Dir); len(ents) != 0 {
		t.Errorf("the refused run wrote %d entries into --dir", len(ents))
	}
}
