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

// TestWarmGroups: fetch_warm's groups keep every sample once, in a group
// where no other sample reads the same chunk (with the margins a fetch
// reads around its bytes), and within half the memory budget.
func TestWarmGroups(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ChunkBytes, cfg.CacheMemoryBytes, cfg.MaxBytes = 16<<20, 128<<20, 1<<20
	e := &env{cfg: cfg}
	var ss []sample
	for i := int64(0); i < 300; i++ { // spread over 8 segments of 32 MiB, some near chunk boundaries
		pos := (i * 7919 * 4099) % (32 << 20)
		if i%10 == 0 {
			pos = 16<<20 + 10852
		}
		ss = append(ss, sample{offset: i, seg: int(i % 8), pos: pos, len: 1 << 20})
	}
	groups := e.warmGroups(ss)
	seen := map[int64]bool{}
	per := int64(cfg.MaxBytes) + cfg.ChunkBytes/4
	for gi, g := range groups {
		if len(g) == 0 || int64(len(g))*per > cfg.CacheMemoryBytes/2 {
			t.Fatalf("group %d has %d samples (at most %d fit half the budget)", gi, len(g), cfg.CacheMemoryBytes/2/per)
		}
		type chunk struct {
			seg int
			i   int64
		}
		used := map[chunk]int64{}
		for _, s := range g {
			seen[s.offset] = true
			for i := max(s.pos-1<<20, 0) / cfg.ChunkBytes; i <= (s.pos+int64(cfg.MaxBytes)+1<<20)/cfg.ChunkBytes; i++ {
				if o, ok := used[chunk{s.seg, i}]; ok {
					t.Fatalf("group %d: offsets %d and %d both read chunk %d of segment %d", gi, o, s.offset, i, s.seg)
				}
				used[chunk{s.seg, i}] = s.offset
			}
		}
	}
	if len(seen) != len(ss) {
		t.Fatalf("groups hold %d of %d samples", len(seen), len(ss))
	}
}
