//go:build !linux

package tmpfs

import "testing"

// Mount skips the test: tmpfs mounts are Linux's.
func Mount(t testing.TB, size string) string {
	t.Skip("tmpfs mounts need Linux")
	return ""
}

// ReadOnly is Linux's only.
func ReadOnly(t testing.TB, dir string, ro bool) { t.Skip("tmpfs mounts need Linux") }

// Fill is Linux's only.
func Fill(t testing.TB, dir string) string {
	t.Skip("tmpfs mounts need Linux")
	return ""
}
