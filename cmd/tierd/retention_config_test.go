package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLocalRetentionKeysApart: a file setting only log.local.retention.ms
// leaves log.local.retention.bytes at -2 (same as retention.bytes); the
// defaults once shared one variable, so the ms value became a byte limit.
func TestLocalRetentionKeysApart(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tierd.yaml")
	yaml := "copier:\n  log_dirs: [" + dir + "]\n  log.local.retention.ms: 3600000\n  ownership_lease: 0s\nbucket:\n  filesystem: {dir: " + dir + "/b}\nmetadata:\n  dir: " + dir + "/m\n"
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Copier.Retention
	if *r.LocalRetentionMs != 3600000 || *r.LocalRetentionBytes != -2 {
		t.Fatalf("log.local.retention.ms %d, log.local.retention.bytes %d; want 3600000 and -2", *r.LocalRetentionMs, *r.LocalRetentionBytes)
	}
}
