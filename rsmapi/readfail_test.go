package rsmapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// halfReader writes the first half of a range, then fails; before is
// true to fail before the first byte.
type halfReader struct {
	st     Storage
	before bool
}

func (h halfReader) WriteLogRange(ctx context.Context, meta remotelog.SegmentMetadata, start, n int64, w io.Writer) (int64, error) {
	if h.before {
		return 0, fmt.Errorf("%w: the .log holds fewer bytes than its row says", ErrDataLoss)
	}
	written, err := directReader{st: h.st}.WriteLogRange(ctx, meta, start, n/2, w)
	if err != nil {
		return written, err
	}
	return written, fmt.Errorf("%w: the object ended early", ErrDataLoss)
}

// A read failing before its first byte is an error answer; after it, the
// connection is cut, so the client sees a short body, never a whole one.
func TestReadFailures(t *testing.T) {
	for _, before := range []bool{true, false} {
		st, cat := newMemStorage("p/"+DefaultPrefix), newMemCatalogue()
		r := newRig(t, withBackends(cat, st), withOptions(WithLogReader(halfReader{st: st, before: before})))
		r.mem, r.mcat = st, cat
		s := r.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 0})
		r.copy(s)
		a, err := r.try(context.Background(), http.MethodGet, s.path()+"/log", nil, "-", "Range", "bytes=0-")
		switch {
		case before && (err != nil || a.code != http.StatusInternalServerError || a.reason() != "INTERNAL"):
			t.Errorf("a read failing before its first byte: %d %s, %v; want 500 INTERNAL", a.code, a.body, err)
		case !before && (err == nil || len(a.body) >= len(s.log)):
			t.Errorf("a read failing mid-answer: %d, %d bytes, %v; want a cut connection and a short body", a.code, len(a.body), err)
		}
		if got := r.counter("tierd_rsm_fetch_errors_total", "topic", "orders", "partition", "0"); got != 1 {
			t.Errorf("tierd_rsm_fetch_errors_total = %v, want 1", got)
		}
	}
}
