package copier

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
)

// A partition with only its active segment says there is no rolled
// segment yet, not that every rolled segment has a copy.
func TestStatusNoRolledSegmentYet(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	writeSegment(t, r.dir(), 0, seq(0, 5), same(r.now.UnixMilli(), 5), 10)
	r.sync()
	if st := r.status(r.tp); st.State != remotelog.TierUpToDate || !strings.HasPrefix(st.Detail, "no rolled segment yet") {
		t.Fatalf("status %+v", st)
	}
}

// A dangling symlink named like a segment is not taken for the active
// segment: the pass refuses the partition, so the real active segment is
// neither copied as rolled nor deleted locally.
func TestSegmentNameNotARegularFile(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Retention.LocalRetentionMs = ptr(0)
	r := newRig(t, cfg, nil)
	writeSegment(t, r.dir(), 0, seq(0, 5), same(r.now.UnixMilli(), 5), 10)
	writeSegment(t, r.dir(), 5, seq(5, 5), same(r.now.UnixMilli(), 5), 10)
	if err := os.Symlink(filepath.Join(r.dir(), "nothing"), filepath.Join(r.dir(), kafkalog.FileName(9999, kafkalog.LogSuffix))); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Sync(context.Background()); !errors.Is(err, kafkalog.ErrNotSegmentFile) {
		t.Fatalf("sync: %v, want ErrNotSegmentFile", err)
	}
	if st := r.states(); st[remotelog.CopySegmentFinished] > 1 {
		t.Fatalf("copies %v: the active segment 5 was copied as rolled", st)
	}
	for _, base := range []int64{5} {
		if _, err := os.Stat(filepath.Join(r.dir(), kafkalog.FileName(base, kafkalog.LogSuffix))); err != nil {
			t.Fatalf("the active segment %d: %v", base, err)
		}
	}
}
