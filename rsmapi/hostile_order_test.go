package rsmapi

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// TestCopyAfterDeleteOfAnIDWithoutRow: the broker deletes a segment id
// tierd has no row for (a copy ended before it wrote one, or tierd's
// metadata was lost); a copy of that id arriving after the DELETE (a
// request queued behind the copy the DELETE ended) is refused as for an
// id with a row: it would outlive the broker's delete.
func TestCopyAfterDeleteOfAnIDWithoutRow(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	if d := r.do(http.MethodDelete, s.path(), nil, "-"); d.code != http.StatusNoContent {
		t.Fatal(d.code)
	}
	for _, tc := range []struct {
		ctype string
		body  func() io.Reader
	}{
		{"application/json", s.body},
		{UploadContentType, func() io.Reader { return bytes.NewReader(s.uploadBody()) }},
	} {
		a := r.do(http.MethodPut, s.path(), tc.body(), "-", "Content-Type", tc.ctype)
		if a.code != http.StatusBadRequest || !strings.Contains(string(a.body), "new segment id") {
			t.Errorf("copy (%s) of an id deleted without a row: %d %s; want 400 saying a new attempt has a new id", tc.ctype, a.code, a.body)
		}
	}
	if keys := r.keys(); len(keys) != 0 {
		t.Errorf("objects stored: %v", keys)
	}
	if row, ok := r.row(s.name); !ok || row.State != remotelog.DeleteSegmentFinished {
		t.Errorf("row after the DELETE: %+v %v; want one DELETE_SEGMENT_FINISHED", row, ok)
	}
}

// TestReadUnderAnotherName: a read that names a stored copy's segment id
// under another topic, partition or start offset is not that copy (every
// key follows from all four values): 404, whether or not tierd holds the
// copy's manifest in memory.
func TestReadUnderAnotherName(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	r.copy(s)
	id := s.name.id.String()
	for _, p := range []string{"/v1/segments/other/0/0/" + id, "/v1/segments/orders/1/0/" + id, "/v1/segments/orders/0/5/" + id} {
		for _, what := range []string{"/log", "/index/OFFSET"} {
			if a := r.do(http.MethodGet, p+what, nil, "-"); a.code != http.StatusNotFound {
				t.Errorf("GET %s%s: %d (%d bytes); want 404", p, what, a.code, len(a.body))
			}
		}
	}
	checkRoundTrip(t, r, s)
}
