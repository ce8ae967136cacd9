package locallog

import (
	"bytes"
	"math"
	"os"
	"testing"

	"github.com/tierd/tierd/seglog"
)

// TestDirectoryRecreated: a partition directory deleted and created again
// at the same path with the same segment file names (a small topic
// deleted and created again, the directory restored from elsewhere) is
// read from its new files, never from the old ones still open.
func TestDirectoryRecreated(t *testing.T) {
	write := func(dir string, val string, n int) []byte {
		l, err := seglog.Open(dir, seglog.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if _, err := l.Append(seglog.Record{Value: []byte(val), Timestamp: 7}); err != nil {
				t.Fatal(err)
			}
		}
		data, err := l.Read(0, math.MaxInt32)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return data
	}
	l0, dir := newSeglog(t)
	l0.Close()
	old := write(dir, "old incarnation", 3)
	p, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got, err := p.Read(0, math.MaxInt32, math.MaxInt64); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("old: %d bytes, %v", len(got), err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	fresh := write(dir, "new!", 5)
	o, err := p.Offsets()
	if err != nil || o.HighWatermark != 5 {
		t.Fatalf("offsets after the directory was recreated: %+v %v, want high watermark 5", o, err)
	}
	if got, err := p.Read(0, math.MaxInt32, math.MaxInt64); err != nil || !bytes.Equal(got, fresh) {
		t.Fatalf("after the directory was recreated: %d bytes (%q...), %v; want the new %d bytes", len(got), got[:min(len(got), 80)], err, len(fresh))
	}
}
