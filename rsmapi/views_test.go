package rsmapi

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
)

// errStoreDown stands for an object store that does not answer.
var errStoreDown = errors.New("dial tcp 127.0.0.1:9000: connect: connection refused")

// TestStoreDownDuringCopy: a copy that fails in the store answers 503
// and leaves its row COPY_SEGMENT_STARTED when even its clean-up cannot
// reach the store; once the store is back, the broker's DELETE of that
// attempt (or else the janitor) leaves nothing behind.
func TestStoreDownDuringCopy(t *testing.T) {
	for _, who := range []string{"broker's delete", "janitor"} {
		t.Run(who, func(t *testing.T) {
			r := newRig(t)
			s := r.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 0})
			down := true
			r.mem.setHook(func(_ context.Context, key string) error {
				if down && (strings.HasSuffix(key, kafkalog.TimeIndexSuffix) || strings.HasPrefix(key, "delete ")) {
					return errStoreDown
				}
				return nil
			})
			a := r.do(http.MethodPut, s.path(), s.body(), "-")
			if a.code != http.StatusServiceUnavailable || a.reason() != "UNAVAILABLE" {
				t.Fatalf("copy while the store fails: %d %s; want 503 UNAVAILABLE", a.code, a.body)
			}
			if keys := r.mem.keys(); len(keys) == 0 {
				t.Fatal("the test wants objects left behind by a clean-up the store refused")
			}
			if row, _ := r.mcat.row(s.name.id); row.State != remotelog.DeleteSegmentStarted {
				t.Errorf("row of the failed attempt: %s, want DELETE_SEGMENT_STARTED (its delete did not finish)", row.State)
			}
			if st := r.srv.Status(); st.Unfinished != 1 || st.Stored != 0 {
				t.Errorf("status: %d unfinished, %d stored; want 1 and 0", st.Unfinished, st.Stored)
			}
			down = false
			if who == "janitor" {
				r.srv.sweep(context.Background(), false)
			} else if d := r.do(http.MethodDelete, s.path(), nil, "-"); d.code != http.StatusNoContent {
				t.Fatalf("DELETE: %d %s", d.code, d.body)
			}
			if keys := r.mem.keys(); len(keys) != 0 {
				t.Errorf("objects left: %v", keys)
			}
			if row, _ := r.mcat.row(s.name.id); row.State != remotelog.DeleteSegmentFinished {
				t.Errorf("row: %s, want DELETE_SEGMENT_FINISHED", row.State)
			}
		})
	}
}

// TestStartedRowsAtStart: rows still COPY_SEGMENT_STARTED when the
// endpoint starts are attempts whose request never got success: their
// objects are deleted, the proof logged, the rows DELETE_SEGMENT_FINISHED;
// finished copies are kept.
func TestStartedRowsAtStart(t *testing.T) {
	first := newRig(t)
	kept := first.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	first.copy(kept)
	// What a copy killed after its upload, before its row was FINISHED,
	// leaves: the row COPY_SEGMENT_STARTED and every object, the manifest
	// included.
	cut := first.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 1})
	meta := remotelog.SegmentMetadata{TopicPartition: cut.name.tp, ID: cut.name.id, StartOffset: 0, EndOffset: cut.end,
		SizeInBytes: int64(len(cut.log)), State: remotelog.CopySegmentStarted}
	if err := first.mcat.PutBrokerCopy(meta); err != nil {
		t.Fatal(err)
	}
	src := func(b []byte) Source { return Source{R: bytes.NewReader(b), Size: int64(len(b))} }
	if _, err := first.mem.Copy(context.Background(), meta, &Files{Log: src(cut.log), OffsetIndex: src(cut.index),
		TimeIndex: src(cut.timeIndex), LeaderEpochCheckpoint: cut.checkpoint}); err != nil {
		t.Fatal(err)
	}
	first.stop()

	second := newRig(t, withBackends(first.mcat, first.mem))
	second.mem, second.mcat = first.mem, first.mcat
	second.srv.sweep(context.Background(), true)
	for _, k := range second.mem.keys() {
		if strings.Contains(k, cut.name.id.String()) {
			t.Errorf("object of the attempt that never got success left: %s", k)
		}
	}
	if row, _ := second.mcat.row(cut.name.id); row.State != remotelog.DeleteSegmentFinished {
		t.Errorf("row of the cut attempt: %s, want DELETE_SEGMENT_FINISHED\n%s", row.State, second.logs)
	}
	if !strings.Contains(second.logs.String(), "COPY_SEGMENT_STARTED when tierd started") {
		t.Errorf("the delete's proof is not logged:\n%s", second.logs)
	}
	checkRoundTrip(t, second, kept)
}

// TestCatalogueDownAtFinish: a copy whose row cannot be marked finished
// answers 503 and deletes what it stored; its row, left
// COPY_SEGMENT_STARTED, is finished by the janitor once the catalogue
// answers.
func TestCatalogueDownAtFinish(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 1})
	r.mem.setHook(func(_ context.Context, key string) error {
		if strings.HasSuffix(key, ".manifest.json") && !strings.HasPrefix(key, "delete ") {
			r.mcat.setDown(rlmm.ErrUnavailable)
		}
		return nil
	})
	if a := r.do(http.MethodPut, s.path(), s.body(), "-"); a.code != http.StatusServiceUnavailable || a.reason() != "UNAVAILABLE" {
		t.Fatalf("copy with the catalogue failing at the end: %d %s; want 503", a.code, a.body)
	}
	if keys := r.mem.keys(); len(keys) != 0 {
		t.Errorf("objects left: %v", keys)
	}
	r.mcat.setDown(nil)
	if row, _ := r.mcat.row(s.name.id); row.State != remotelog.CopySegmentStarted {
		t.Fatalf("row: %s, want COPY_SEGMENT_STARTED", row.State)
	}
	r.srv.sweep(context.Background(), false)
	if row, _ := r.mcat.row(s.name.id); row.State != remotelog.DeleteSegmentFinished {
		t.Errorf("row after the janitor: %s, want DELETE_SEGMENT_FINISHED", row.State)
	}
	if !strings.Contains(r.logs.String(), "no copy of it is in flight") {
		t.Errorf("the janitor's proof is not logged:\n%s", r.logs)
	}
}

// TestMetadataLost: with tierd's catalogue gone, reads and deletes still
// work (keys derive from the request, sizes from the manifests), and the
// catalogue is rebuilt from the manifests under the prefix.
func TestMetadataLost(t *testing.T) {
	first := newRig(t)
	a := first.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	b := first.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 1})
	first.copy(a)
	first.copy(b)
	first.stop()

	lost := newMemCatalogue()
	r := newRig(t, withBackends(lost, first.mem))
	r.mem, r.mcat = first.mem, lost
	// Reads before any rebuild: from the manifests.
	checkRoundTrip(t, r, a)
	if d := r.do(http.MethodDelete, b.path(), nil, "-"); d.code != http.StatusNoContent {
		t.Fatalf("DELETE without a row: %d %s", d.code, d.body)
	}
	for _, k := range r.mem.keys() {
		if strings.Contains(k, b.name.id.String()) {
			t.Errorf("object of the deleted copy left: %s", k)
		}
	}
	if g := r.do(http.MethodGet, b.path()+"/log", nil, "-"); g.code != http.StatusNotFound {
		t.Errorf("read after the DELETE: %d", g.code)
	}
	n, err := r.srv.Rebuild(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Rebuild: %d rows, %v; want the 1 copy left", n, err)
	}
	row, ok := lost.row(a.name.id)
	if !ok || row.State != remotelog.CopySegmentFinished || row.SizeInBytes != int64(len(a.log)) || row.EndOffset != a.end {
		t.Errorf("rebuilt row: %+v", row)
	}
	// The DELETE without a row left a DELETE_SEGMENT_FINISHED row (kept
	// DeletedRowsKept, as any deleted copy's): orders-1 shows none stored.
	if st := r.srv.Status(); st.Stored != 1 || st.StoredBytes != int64(len(a.log)) || len(st.Partitions) != 2 ||
		st.Partitions[0].Stored != 1 || st.Partitions[1].Stored != 0 {
		t.Errorf("status after the rebuild: %+v", st)
	}
	checkRoundTrip(t, r, a)
}

// TestStoredNotFinishedByBroker: a copy tierd stored and answered stays,
// whatever the broker did with the answer, until the broker deletes it:
// tierd never deletes a finished copy by itself.
func TestStoredNotFinishedByBroker(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	r.copy(s)
	for range 3 {
		r.srv.sweep(context.Background(), false)
	}
	r.srv.sweep(context.Background(), true)
	checkRoundTrip(t, r, s)
	if st := r.srv.Status(); st.Stored != 1 || st.Unfinished != 0 {
		t.Errorf("status: %+v", st)
	}
}
