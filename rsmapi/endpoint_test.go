package rsmapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
)

// checkRoundTrip reads back every part of a stored copy of s through the
// endpoint and compares it byte for byte with the broker's files.
func checkRoundTrip(t *testing.T, r *rig, s *seg) {
	t.Helper()
	size := int64(len(s.log))
	whole := r.do(http.MethodGet, s.path()+"/log", nil, "-")
	if whole.code != http.StatusOK || !bytes.Equal(whole.body, s.log) {
		t.Fatalf("GET log without Range: %d, %d bytes, want 200 and the %d bytes of the .log", whole.code, len(whole.body), size)
	}
	for _, rg := range []struct {
		hdr         string
		first, last int64
	}{
		{"bytes=0-0", 0, 0},
		{"bytes=0-99", 0, 99},
		{fmt.Sprintf("bytes=%d-", size/2), size / 2, size - 1},
		{fmt.Sprintf("bytes=%d-%d", size/3, size/2), size / 3, size / 2},
		{fmt.Sprintf("bytes=%d-%d", size-5, size+1000), size - 5, size - 1}, // the end is clamped
		{fmt.Sprintf("bytes=%d-", size-1), size - 1, size - 1},
	} {
		a := r.do(http.MethodGet, s.path()+"/log", nil, "-", "Range", rg.hdr)
		want := s.log[rg.first : rg.last+1]
		cr := fmt.Sprintf("bytes %d-%d/%d", rg.first, rg.last, size)
		if a.code != http.StatusPartialContent || !bytes.Equal(a.body, want) || a.h.Get("Content-Range") != cr {
			t.Errorf("Range %s: %d, %d bytes, Content-Range %q; want 206, bytes [%d, %d] of the .log, %q",
				rg.hdr, a.code, len(a.body), a.h.Get("Content-Range"), rg.first, rg.last, cr)
		}
	}
	atEnd := r.do(http.MethodGet, s.path()+"/log", nil, "-", "Range", fmt.Sprintf("bytes=%d-", size))
	if atEnd.code != http.StatusPartialContent || len(atEnd.body) != 0 || atEnd.h.Get("Content-Range") != fmt.Sprintf("bytes */%d", size) {
		t.Errorf("Range at the size: %d, %d bytes, %q; want 206, empty, bytes */%d", atEnd.code, len(atEnd.body), atEnd.h.Get("Content-Range"), size)
	}
	past := r.do(http.MethodGet, s.path()+"/log", nil, "-", "Range", fmt.Sprintf("bytes=%d-", size+1))
	if past.code != http.StatusRequestedRangeNotSatisfiable || past.reason() != "RANGE_NOT_SATISFIABLE" || past.h.Get("Content-Range") != fmt.Sprintf("bytes */%d", size) {
		t.Errorf("Range past the size: %d %s %q; want 416 RANGE_NOT_SATISFIABLE with bytes */%d", past.code, past.body, past.h.Get("Content-Range"), size)
	}
	offs, err := index.ParseOffsetIndex(s.index, s.name.start)
	if err != nil {
		t.Fatal(err)
	}
	times, err := index.ParseTimeIndex(s.timeIndex, s.name.start)
	if err != nil {
		t.Fatal(err)
	}
	indexes := map[string][]byte{
		"OFFSET": s.index[:len(offs)*index.OffsetEntrySize], "TIMESTAMP": s.timeIndex[:len(times)*index.TimeEntrySize],
		"LEADER_EPOCH": s.checkpoint,
	}
	if s.snapPath != "" {
		indexes["PRODUCER_SNAPSHOT"] = s.snapshot
	} else if a := r.do(http.MethodGet, s.path()+"/index/PRODUCER_SNAPSHOT", nil, "-"); a.code != http.StatusNotFound {
		t.Errorf("GET index/PRODUCER_SNAPSHOT of a segment without one: %d %s; want 404", a.code, a.body)
	}
	for typ, want := range indexes {
		a := r.do(http.MethodGet, s.path()+"/index/"+typ, nil, "-")
		if a.code != http.StatusOK || !bytes.Equal(a.body, want) {
			t.Errorf("GET index/%s: %d, %d bytes %q; want 200 and the broker's %d bytes", typ, a.code, len(a.body), a.body, len(want))
		}
	}
	if a := r.do(http.MethodGet, s.path()+"/index/TRANSACTION", nil, "-"); a.code != http.StatusNotFound || a.reason() != "NOT_FOUND" {
		t.Errorf("GET index/TRANSACTION of a segment without one: %d %s; want 404 NOT_FOUND", a.code, a.body)
	}
}

func TestCopyByPathReadDelete(t *testing.T) {
	for _, fx := range []fixtureSeg{fixSmall, fixOffsets} {
		t.Run(fx.dir, func(t *testing.T) {
			r := newRig(t)
			tp := remotelog.TopicPartition{Topic: "orders", Partition: 3}
			s := r.layout(fx, tp)
			a := r.copy(s)
			var ans struct {
				CustomMetadata string `json:"customMetadata"`
				Bytes          int64  `json:"bytes"`
			}
			if err := json.Unmarshal(a.body, &ans); err != nil {
				t.Fatal(err)
			}
			// 't', version 1, flags: a producer snapshot, no transaction index.
			if ans.CustomMetadata != base64.StdEncoding.EncodeToString([]byte{'t', 1, 2}) || ans.Bytes != int64(len(s.log)) {
				t.Errorf("copy answer %s: want customMetadata %q and bytes %d", a.body, "dAEC", len(s.log))
			}
			row, ok := r.row(s.name)
			if !ok || row.State != remotelog.CopySegmentFinished || row.SizeInBytes != int64(len(s.log)) || row.EndOffset != s.end ||
				row.TopicID != "B3_HiNPgSQ6oxG9ZZ6ED5A" || !row.ProducerSnapshotPresent || row.TxnIndexPresent || row.BrokerID != 1 {
				t.Fatalf("catalogue row after the copy: %+v (found %v)", row, ok)
			}
			checkRoundTrip(t, r, s)
			if got := r.counter("tierd_rsm_copy_bytes_total", "topic", "orders", "partition", "3"); got != float64(len(s.log)) {
				t.Errorf("tierd_rsm_copy_bytes_total = %v, want %d", got, len(s.log))
			}
			if got := r.counter("tierd_rsm_copy_requests_total", "topic", "orders", "partition", "3"); got != 1 {
				t.Errorf("tierd_rsm_copy_requests_total = %v, want 1", got)
			}

			for i := 0; i < 2; i++ { // idempotent
				if d := r.do(http.MethodDelete, s.path(), nil, "-"); d.code != http.StatusNoContent {
					t.Fatalf("DELETE %d: %d %s", i, d.code, d.body)
				}
			}
			if keys := r.keys(); len(keys) != 0 {
				t.Errorf("objects left after DELETE: %v", keys)
			}
			if row, _ := r.row(s.name); row.State != remotelog.DeleteSegmentFinished {
				t.Errorf("row after DELETE: %s, want DELETE_SEGMENT_FINISHED", row.State)
			}
			for _, p := range []string{"/log", "/index/OFFSET", "/index/LEADER_EPOCH"} {
				if a := r.do(http.MethodGet, s.path()+p, nil, "-"); a.code != http.StatusNotFound || a.reason() != "NOT_FOUND" {
					t.Errorf("GET %s after DELETE: %d %s; want 404", p, a.code, a.body)
				}
			}
			if got := r.counter("tierd_rsm_delete_requests_total", "topic", "orders", "partition", "3"); got != 2 {
				t.Errorf("tierd_rsm_delete_requests_total = %v, want 2", got)
			}
		})
	}
}

func TestCopyByUpload(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixOffsets, remotelog.TopicPartition{Topic: "payments", Partition: 0})
	a := r.do(http.MethodPut, s.path(), bytes.NewReader(s.uploadBody()), "-", "Content-Type", UploadContentType)
	if a.code != http.StatusOK {
		t.Fatalf("copy by upload: %d %s", a.code, a.body)
	}
	checkRoundTrip(t, r, s)
	if keys := r.keys(); len(keys) != 6 {
		t.Errorf("objects of a copy by upload with a snapshot and no transaction index: %v, want 6", keys)
	}
}

func TestDeleteOfUnknownCopy(t *testing.T) {
	r := newRig(t)
	id := remotelog.NewSegmentID()
	if a := r.do(http.MethodDelete, "/v1/segments/orders/0/100/"+id.String(), nil, "-"); a.code != http.StatusNoContent {
		t.Fatalf("DELETE of a copy never stored: %d %s, want 204", a.code, a.body)
	}
	for _, p := range []string{"/log", "/index/OFFSET", "/index/TRANSACTION"} {
		if a := r.do(http.MethodGet, "/v1/segments/orders/0/100/"+id.String()+p, nil, "-"); a.code != http.StatusNotFound {
			t.Errorf("GET %s of a copy never stored: %d %s, want 404", p, a.code, a.body)
		}
	}
}

func TestHealth(t *testing.T) {
	ready, why := true, ""
	r := newRig(t, withOptions(WithReadiness(func() (bool, string) { return ready, why })))
	if a := r.do(http.MethodGet, "/v1/health", nil, "-"); a.code != http.StatusOK || !strings.Contains(string(a.body), `"ok"`) {
		t.Errorf("health: %d %s", a.code, a.body)
	}
	ready, why = false, "object store unreachable: dial tcp: connection refused"
	if a := r.do(http.MethodGet, "/v1/health", nil, "-"); a.code != http.StatusServiceUnavailable || !strings.Contains(string(a.body), why) {
		t.Errorf("health while not ready: %d %s", a.code, a.body)
	}
}
