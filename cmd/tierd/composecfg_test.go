package main

import (
	"path/filepath"
	"testing"
)

// TestComposeConfigsLoad: the configs the compose files mount are
// accepted as they are (key names, values, their checks).
func TestComposeConfigsLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "minio", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no compose configs: %v", err)
	}
	for _, f := range files {
		if _, err := loadConfig(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
