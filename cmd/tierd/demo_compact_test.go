package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/checkpoint"
)

// TestDemoCompact runs "tierd demo --compact", the reference compaction
// run, and checks its counts (34, 258 with tombstones at 32 and 33, 506)
// as the scans through the Kafka listener found them, the tiered copies
// marked compacted, the final scan across both tiers, and the kept
// cleaner-offset-checkpoint.
func TestDemoCompact(t *testing.T) {
	keep := filepath.Join(t.TempDir(), "keep")
	var out, errOut bytes.Buffer
	if err := demo(context.Background(), demoOptions{keep: keep, runID: "compact", compact: true}, &out, &errOut); err != nil {
		t.Fatalf("demo --compact: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	s := out.String()
	norm := regexp.MustCompile(`\s+`)
	flat := norm.ReplaceAllString(s, " ")
	for _, want := range []string{
		"8 keys x 4 updates + 2 tombstones: 34 records, 6 keys, tombstones at [32 33]",
		"250 filler records (keys filler-0..249): 284 records, 256 keys, tombstones at [32 33]",
		"first cleaner pass: 258 records, 256 keys, tombstones at [32 33]",
		"250 more filler records (keys filler-250..499): 508 records, 506 keys, tombstones at [32 33]",
		"second cleaner pass, after delete.retention.ms=100: 506 records, 506 keys, tombstones at []",
		"scan across the remote and local tiers: 506 records, 506 keys, tombstones at []",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	// Two copies of the cleaned segments, merged by remote compaction
	// into one copy of offsets 0-413, then deleted.
	finished := regexp.MustCompile(`(?m)^\s*remote\s+(\d+)\s+(\d+)\s+\d+\s+COPY_SEGMENT_FINISHED\s+yes\s+2 copies\s*$`).FindAllStringSubmatch(s, -1)
	if len(finished) != 1 || finished[0][1] != "0" || finished[0][2] != "413" {
		t.Errorf("want one finished copy of offsets 0-413 merged from 2 copies, got %v:\n%s", finished, s)
	}
	replaced := regexp.MustCompile(`(?m)^\s*remote\s+\d+\s+\d+\s+\d+\s+DELETE_SEGMENT_FINISHED\s+yes\s+-\s*$`).FindAllString(s, -1)
	if len(replaced) != 2 {
		t.Errorf("want the 2 merged copies deleted, got %d:\n%s", len(replaced), s)
	}
	entries, err := checkpoint.ReadFile(filepath.Join(keep, "logs", checkpoint.CleanerOffsetFile))
	if err != nil {
		t.Fatalf("kept cleaner-offset-checkpoint: %v", err)
	}
	if off, ok := entries[kafkalog.TopicPartition{Topic: compactTopic, Partition: 0}]; len(entries) != 1 || !ok || off != 414 {
		t.Fatalf("cleaner-offset-checkpoint: %v, want only %s-0 at 414 (the active segment's base offset)", entries, compactTopic)
	}
	// "tierd segments" on the kept state says which copies are compacted
	// and which one a remote compaction made, from what.
	code, o, errs := runCmd("segments", "--config", keptConfig(t, keep, "tierd-demo-compact"))
	if code != 0 {
		t.Fatalf("segments: exit %d\n%s\n%s", code, o, errs)
	}
	merges := regexp.MustCompile(`(?m)^  base offset 0 segment \S+: merges 2 copies \(\S+, \S+\)$`)
	if !strings.Contains(o, "1 finished copy of a compacted topic") || !strings.Contains(o, "made by remote compaction:") || !merges.MatchString(o) {
		t.Errorf("segments output lacks the compacted and merged copies:\n%s", o)
	}
}
