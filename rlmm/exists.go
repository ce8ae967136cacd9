package rlmm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Exists reports whether dir holds a metadata store, without opening it
// or writing anything: a tool that only reads must not make an empty
// store where none is (a missing dir is false, not an error). The error
// says the dir could not be read.
func Exists(dir string) (bool, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	d, err := pebble.Peek(dir, vfs.Default)
	if err != nil {
		return false, fmt.Errorf("rlmm: look for a metadata store in %s: %w", dir, err)
	}
	return d.Exists, nil
}
