package rsmapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
)

// gate holds the uploads of .log objects until opened, and says when the
// first one arrived.
type gate struct {
	arrived chan struct{}
	open    chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{arrived: make(chan struct{}), open: make(chan struct{})} }

func (g *gate) hook(ctx context.Context, key string) error {
	if !strings.HasSuffix(key, kafkalog.LogSuffix) || strings.HasPrefix(key, "delete ") {
		return nil
	}
	g.once.Do(func() { close(g.arrived) })
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func TestSameSegmentIDTwiceAtOnce(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	g := newGate()
	r.mem.setHook(g.hook)
	answers := make(chan answer, 2)
	go func() { answers <- r.do(http.MethodPut, s.path(), s.body(), "-") }()
	<-g.arrived // the first copy is uploading its .log
	go func() {
		answers <- r.do(http.MethodPut, s.path(), bytes.NewReader(s.uploadBody()), "-", "Content-Type", UploadContentType)
	}()
	// The second waits for the first's lock: the copies counted so far
	// are the first only, whatever the time the second took to arrive.
	close(g.open)
	for i := 0; i < 2; i++ {
		if a := <-answers; a.code != http.StatusOK {
			t.Errorf("copy %d of the same segment id: %d %s", i, a.code, a.body)
		}
	}
	// The second, after the first stored the copy whole, is answered
	// from the stored copy: nothing is uploaded again.
	if r.mem.copies != 1 || r.mem.maxPerID != 1 {
		t.Errorf("%d copies, at most %d of the same id at once; want 1 (the second answered from the first)", r.mem.copies, r.mem.maxPerID)
	}
	checkRoundTrip(t, r, s)
}

// TestSameSegmentIDAgain: a copy of a segment id already stored whole is
// answered from the stored copy, and a failure of it can delete nothing
// of that copy (the broker may have recorded it finished); one whose
// stored copy lost an object is made again over it.
func TestSameSegmentIDAgain(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	for i := 0; i < 2; i++ {
		if a := r.do(http.MethodPut, s.path(), s.body(), "-"); a.code != http.StatusOK {
			t.Fatalf("copy %d: %d %s", i, a.code, a.body)
		}
	}
	if r.mem.copies != 1 {
		t.Errorf("copies made: %d; want 1 (the second answered from the stored copy)", r.mem.copies)
	}
	// An upload that would fail no longer matters: nothing is uploaded.
	r.mem.setHook(func(ctx context.Context, key string) error { return errors.New("the store fails") })
	if a := r.do(http.MethodPut, s.path(), s.body(), "-"); a.code != http.StatusOK {
		t.Errorf("a third copy while the store would fail uploads: %d %s; want 200 from the stored copy", a.code, a.body)
	}
	r.mem.setHook(nil)
	checkRoundTrip(t, r, s)
	// The stored copy loses its time index: the next copy is made again.
	for _, k := range r.mem.keys() {
		if strings.HasSuffix(k, kafkalog.TimeIndexSuffix) {
			r.mem.b.Delete(context.Background(), k)
		}
	}
	if a := r.do(http.MethodPut, s.path(), s.body(), "-"); a.code != http.StatusOK {
		t.Fatalf("copy over a stored copy missing an object: %d %s", a.code, a.body)
	}
	if r.mem.copies != 2 {
		t.Errorf("copies made: %d; want 2 (the stored copy was not whole)", r.mem.copies)
	}
	checkRoundTrip(t, r, s)
}

func TestTooManyCopies(t *testing.T) {
	r := newRig(t, withConfig(func(c *Config) { c.MaxConcurrentCopies = 2 }))
	g := newGate()
	r.mem.setHook(g.hook)
	var segs []*seg
	for p := range 3 {
		segs = append(segs, r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: int32(p)}))
	}
	answers := make(chan answer, 2)
	go func() { answers <- r.do(http.MethodPut, segs[0].path(), segs[0].body(), "-") }()
	<-g.arrived
	// A copy of the same id as the first waits for its lock and holds the
	// second slot while it waits.
	waiting := make(chan answer, 1)
	go func() { waiting <- r.do(http.MethodPut, segs[0].path(), segs[0].body(), "-") }()
	for r.srv.flights.waiters(segs[0].name.id) < 2 {
		yield()
	}
	a := r.do(http.MethodPut, segs[2].path(), segs[2].body(), "-")
	if a.code != http.StatusTooManyRequests || a.reason() != "TOO_MANY_COPIES" {
		t.Errorf("a third copy with max_concurrent_copies 2: %d %s; want 429 TOO_MANY_COPIES", a.code, a.body)
	}
	close(g.open)
	for _, ch := range []chan answer{answers, waiting} {
		if a := <-ch; a.code != http.StatusOK {
			t.Errorf("copy: %d %s", a.code, a.body)
		}
	}
	if a := r.do(http.MethodPut, segs[2].path(), segs[2].body(), "-"); a.code != http.StatusOK {
		t.Errorf("the third copy once the others ended: %d %s", a.code, a.body)
	}
}

func TestClientGoneMidCopy(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	stored := make(chan struct{})
	var once sync.Once
	// The .log is stored at once; the copy then waits at the offset
	// index's upload.
	r.mem.setHook(func(ctx context.Context, key string) error {
		if strings.HasSuffix(key, kafkalog.IndexSuffix) && !strings.HasPrefix(key, "delete ") {
			once.Do(func() { close(stored) })
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.try(ctx, http.MethodPut, s.path(), s.body(), "-")
		done <- err
	}()
	<-stored
	cancel() // the client goes away
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	// The copy ends, deletes what it stored and is counted failed.
	for r.counter("tierd_rsm_copy_errors_total", "topic", "orders", "partition", "0") < 1 {
		yield()
	}
	if keys := r.mem.keys(); len(keys) != 0 {
		t.Errorf("objects left by a copy whose client went away: %v", keys)
	}
	if row, _ := r.mcat.row(s.name.id); row.State != remotelog.DeleteSegmentFinished {
		t.Errorf("row of the abandoned copy: %s, want DELETE_SEGMENT_FINISHED", row.State)
	}
	if !strings.Contains(r.logs.String(), "the client went away") {
		t.Errorf("no log line names the client going away:\n%s", r.logs)
	}
}

func TestDeleteEndsCopyInFlight(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	g := newGate()
	r.mem.setHook(g.hook)
	copied := make(chan answer, 1)
	go func() { copied <- r.do(http.MethodPut, s.path(), s.body(), "-") }()
	<-g.arrived
	if d := r.do(http.MethodDelete, s.path(), nil, "-"); d.code != http.StatusNoContent {
		t.Fatalf("DELETE during the copy: %d %s", d.code, d.body)
	}
	a := <-copied
	if a.code != http.StatusServiceUnavailable || !strings.Contains(string(a.body), "DELETE") {
		t.Errorf("the copy a DELETE ended: %d %s; want 503 saying so", a.code, a.body)
	}
	if keys := r.mem.keys(); len(keys) != 0 {
		t.Errorf("objects left: %v", keys)
	}
	if row, _ := r.mcat.row(s.name.id); row.State != remotelog.DeleteSegmentFinished {
		t.Errorf("row: %s, want DELETE_SEGMENT_FINISHED", row.State)
	}
}

func TestConcurrentClients(t *testing.T) {
	r := newRig(t, withConfig(func(c *Config) { c.MaxConcurrentCopies = 32 }))
	const n = 32
	var segs []*seg
	for p := range n {
		fx := fixSmall
		if p%2 == 1 {
			fx = fixOffsets
		}
		segs = append(segs, r.layout(fx, remotelog.TopicPartition{Topic: fmt.Sprintf("t%d", p%4), Partition: int32(p)}))
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4*n)
	for i, s := range segs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a answer
			if i%3 == 0 {
				a = r.do(http.MethodPut, s.path(), bytes.NewReader(s.uploadBody()), "-", "Content-Type", UploadContentType)
			} else {
				a = r.do(http.MethodPut, s.path(), s.body(), "-")
			}
			if a.code != http.StatusOK {
				errs <- fmt.Sprintf("copy %s: %d %s", s.name, a.code, a.body)
				return
			}
			for k := range 8 {
				start := int64(k * len(s.log) / 8)
				a := r.do(http.MethodGet, s.path()+"/log", nil, "-", "Range", fmt.Sprintf("bytes=%d-", start))
				if a.code != http.StatusPartialContent || !bytes.Equal(a.body, s.log[start:]) {
					errs <- fmt.Sprintf("read %s from %d: %d, %d bytes", s.name, start, a.code, len(a.body))
				}
			}
			if a := r.do(http.MethodGet, s.path()+"/index/LEADER_EPOCH", nil, "-"); !bytes.Equal(a.body, s.checkpoint) {
				errs <- fmt.Sprintf("epochs of %s: %q", s.name, a.body)
			}
			if a := r.do(http.MethodDelete, s.path(), nil, "-"); a.code != http.StatusNoContent {
				errs <- fmt.Sprintf("delete %s: %d %s", s.name, a.code, a.body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if keys := r.mem.keys(); len(keys) != 0 {
		t.Errorf("objects left: %v", keys)
	}
}

func yield() { runtime.Gosched() }

// A copy of a segment id the broker deleted is refused: it would outlive
// the delete (a late retry of the same request, queued behind the copy the
// DELETE ended).
func TestCopyAfterDeleteRefused(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	r.copy(s)
	if d := r.do(http.MethodDelete, s.path(), nil, "-"); d.code != http.StatusNoContent {
		t.Fatal(d.code)
	}
	a := r.do(http.MethodPut, s.path(), s.body(), "-")
	if a.code != http.StatusBadRequest || !strings.Contains(string(a.body), "new segment id") {
		t.Errorf("copy of a deleted id: %d %s; want 400 saying a new attempt has a new id", a.code, a.body)
	}
	if keys := r.keys(); len(keys) != 0 {
		t.Errorf("objects stored: %v", keys)
	}
}
