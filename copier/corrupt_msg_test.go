package copier

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
)

// TestCorruptSegmentErrorStable: a corrupt segment's error names the
// segment's own file, not the staging link it was checked through (whose
// name holds a new segment id each pass), so pass after pass the same
// error repeats and Run logs it once, not every interval.
func TestCorruptSegmentErrorStable(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	tenBatches(t, r, nil)
	writeSegment(t, r.dir(), 20, nil, nil, 0)
	p := filepath.Join(r.dir(), kafkalog.FileName(0, kafkalog.LogSuffix))
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, 78+70); err != nil { // a record byte of the second batch
		t.Fatal(err)
	}
	f.Close()
	var msgs []string
	for i := 0; i < 2; i++ {
		_, err := r.c.Sync(context.Background())
		if !errors.Is(err, errCorruptSegment) {
			t.Fatalf("pass %d: %v", i, err)
		}
		msgs = append(msgs, err.Error())
	}
	if msgs[0] != msgs[1] || strings.Contains(msgs[0], StagingDir) || !strings.Contains(msgs[0], p) {
		t.Fatalf("errors of two passes:\n%s\n%s\nwant the same, naming %s", msgs[0], msgs[1], p)
	}
}
