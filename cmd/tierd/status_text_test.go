package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
)

// TestStatusText: one pass and one partition are singular; a partition
// without a checkpoint entry says so for its high watermark; one whose
// copies were all deleted shows remote "none", not an empty range; damaged
// copies are counted with the first reason and what clears a mark.
func TestStatusText(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	s := remotelog.TieringStatus{Running: true, Passes: 1, LastPassMs: now.UnixMilli(), LastSuccessMs: now.UnixMilli(),
		Partitions: []remotelog.PartitionStatus{{Topic: "orders", Partition: 0, State: remotelog.TierUpToDate, HighWatermark: -1,
			LogStartOffset: 600, HighestTieredOffset: 599, LocalSegments: 1, LocalLogStartOffset: 600, ActiveBaseOffset: 600,
			DamagedCopies: 2, Damaged: "base offset 0: missing from the bucket: .log", LastCopyMs: -1}}}
	var b bytes.Buffer
	printStatus(&b, s, "test", now)
	out := b.String()
	for _, want := range []string{": 1 pass, the last ended", "the last successful", "1 partition: ", "- (no checkpoint entry)", " none ",
		"2 copies marked damaged", "orders-0: 2 copies, first at base offset 0: missing from the bucket: .log", "a mark clears when"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"1 passes", "1 partitions", "600-599"} {
		if strings.Contains(out, bad) {
			t.Errorf("status has %q:\n%s", bad, out)
		}
	}
}
