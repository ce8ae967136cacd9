package grpcapi

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rsm"
)

// A body that fails after 20000 bytes (three whole 5070-byte batches and
// part of a fourth) ends a unary fetch at once, well before a long
// remote.fetch.max.wait.ms, whatever max_bytes (larger than the segment,
// 0, one batch): no hang on the bytes that will never come. The answer is
// the whole batches that arrived (three, or the one max_bytes 0 or 1
// asks), next_offset after them, and a load failure that cut an answer
// short is counted.
func TestFetchLoadFailsMidBody(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	cfg := DefaultConfig()
	cfg.MaxWaitMs = 60000
	cfg.PrefetchBytes = 0
	for _, tc := range []struct {
		maxBytes int32
		want     int64 // batches, one offset each
	}{{1 << 30, 3}, {1 << 20, 3}, {0, 1}, {1, 1}} {
		mgr, _ := rsm.NewManager(stallBucket{Bucket: e.Bucket, n: 20000, fail: true}, rsm.Config{})
		reg := prometheus.NewRegistry()
		srv, err := NewServer(cfg, e.Store, mgr, WithRegisterer(reg))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var resp *tierdpb.FetchResponse
		go func() {
			defer close(done)
			resp, err = srv.Fetch(context.Background(), &tierdpb.FetchRequest{Topic: "t", Offset: 0, MaxBytes: tc.maxBytes})
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("max_bytes %d: no answer 30s after a load failed", tc.maxBytes)
		}
		srv.Close()
		if err != nil {
			t.Fatalf("max_bytes %d: %v, want the %d batches that arrived", tc.maxBytes, err, tc.want)
		}
		if bs := readtest.Batches(t, resp.Records); int64(len(bs)) != tc.want || resp.NextOffset != tc.want {
			t.Errorf("max_bytes %d: %d batches, next %d; want %d, %d", tc.maxBytes, len(bs), resp.NextOffset, tc.want, tc.want)
		}
		cut := 0.0
		if tc.want == 3 { // max_bytes 0 and 1 end at their one batch, not cut short
			cut = 1
		}
		if n := readtest.SeriesValue(t, reg, "tierd_fetch_short_answers_total", "reason", "load_failed"); n != cut {
			t.Errorf("max_bytes %d: %v answers counted as cut short by a failed load, want %v", tc.maxBytes, n, cut)
		}
	}
}

// A unary fetch whose body stalls inside the first batch it leaves out
// (max_bytes 18000: three 5070-byte batches go in, the fourth, whose
// header has arrived, ends past 18000; the body stalls at byte 16000)
// answers with the three at once, not after remote.fetch.max.wait.ms
// spent waiting for bytes it does not send.
func TestFetchStallInBatchLeftOut(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	cfg := DefaultConfig()
	cfg.MaxWaitMs = 600000
	cfg.RequestTimeout = time.Hour // nor may these end the wait before the test gives up
	cfg.Cache.LoadTimeout = time.Hour
	cfg.PrefetchBytes = 0
	mgr, _ := rsm.NewManager(stallBucket{Bucket: e.Bucket, n: 16000}, rsm.Config{})
	srv, err := NewServer(cfg, e.Store, mgr)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	done := make(chan struct{})
	var resp *tierdpb.FetchResponse
	go func() {
		defer close(done)
		resp, err = srv.Fetch(context.Background(), &tierdpb.FetchRequest{Topic: "t", Offset: 0, MaxBytes: 18000})
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("no answer after 60s: the read waits for the body of a batch it leaves out")
	}
	if err != nil {
		t.Fatal(err)
	}
	if bs := readtest.Batches(t, resp.Records); len(bs) != 3 || resp.NextOffset != 3 {
		t.Fatalf("%d batches, next %d; want 3, 3", len(bs), resp.NextOffset)
	}
}
