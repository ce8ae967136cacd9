package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoteCompactionConfig loads copier.remote_compaction, its one
// fractional setting included, and refuses fractions elsewhere in it and
// out-of-range values.
func TestRemoteCompactionConfig(t *testing.T) {
	dir := t.TempDir()
	base := "copier:\n  log_dirs: [/x]\n  broker_id: 1\n  topics: {orders: {cleanup.policy: compact}}\n  remote_compaction: %s\nmetadata: {dir: /m}\nbucket: {filesystem: {dir: /b}}\n"
	load := func(rc string) (config, error) {
		p := filepath.Join(dir, "tierd.yaml")
		if err := os.WriteFile(p, []byte(strings.Replace(base, "%s", rc, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return loadConfig(p)
	}
	cfg, err := load("{min.cleanable.dirty.ratio: 0.25, segment.bytes: 1000, delete.retention.ms: 5}")
	if err != nil {
		t.Fatal(err)
	}
	rc := cfg.Copier.RemoteCompaction
	if !rc.Enable || rc.MinCleanableDirtyRatio != 0.25 || rc.SegmentBytes != 1000 || rc.DeleteRetentionMs != 5 ||
		*cfg.Copier.Topics["orders"].CleanupPolicy != "compact" {
		t.Fatalf("loaded %+v", rc)
	}
	for rc, want := range map[string]string{
		"{segment.bytes: 1000.5}":          "whole numbers",
		"{min.cleanable.dirty.ratio: 1.5}": "min.cleanable.dirty.ratio 1.5 is out of range",
		"{segment.bytes: 10}":              "segment.bytes 10 is out of range",
		"{delete.retention.ms: -1}":        "delete.retention.ms -1 must not be negative",
	} {
		if _, err := load(rc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", rc, err, want)
		}
	}
}
