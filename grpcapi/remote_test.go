package grpcapi

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread"
	"github.com/tierd/tierd/rsm"
)

// ReadRemote answers what the gRPC Fetch answers, byte for byte, and a
// sequential ReadRemote reader gets the prefetch a gRPC reader gets.
func TestReadRemoteMatchesFetch(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.Cache.ChunkBytes = 64 << 10
	// Whole answers only: a max wait ending before a cold read's bytes
	// arrive (on a loaded machine) answers with the batches that did,
	// and the Fetch after it, served from the cache, with more
	// (TestMaxWaitPartialAnswer covers short answers).
	cfg.MaxWaitMs = 600000
	e := newEnv(t, cfg, WithRegisterer(reg))
	readtest.ReferenceLog(t, e.Rig)
	ctx := context.Background()
	for off := int64(0); off < 600; off += 7 {
		for _, maxBytes := range []int{0, 1, 12000, 1 << 20} {
			rr, err := e.srv.Engine().ReadRemote(ctx, e.TP, off, maxBytes)
			if err != nil {
				t.Fatalf("ReadRemote(%d, %d): %v", off, maxBytes, err)
			}
			resp, err := e.fetch(off, int32(maxBytes))
			if err != nil {
				t.Fatalf("Fetch(%d, %d): %v", off, maxBytes, err)
			}
			if !bytes.Equal(rr.Records, resp.Records) || rr.Next != resp.NextOffset ||
				rr.Offsets.LogStartOffset != resp.LogStartOffset || rr.Offsets.HighestTieredOffset != resp.HighestTieredOffset {
				t.Fatalf("ReadRemote(%d, %d): %d bytes to %d (%+v); Fetch: %d bytes to %d", off, maxBytes,
					len(rr.Records), rr.Next, rr.Offsets, len(resp.Records), resp.NextOffset)
			}
			if bs := readtest.Batches(t, rr.Records); len(bs) == 0 || bs[0].BaseOffset != off || bs[len(bs)-1].LastOffset+1 != rr.Next {
				t.Fatalf("ReadRemote(%d, %d): batches %+v, next %d", off, maxBytes, bs, rr.Next)
			}
		}
	}
	e.srv.Engine().DropCaches(false)
	before := readtest.MetricValue(t, reg, "tierd_cache_prefetches_total")
	for next := int64(0); next < 200; {
		rr, err := e.srv.Engine().ReadRemote(ctx, e.TP, next, 32<<10)
		if err != nil {
			t.Fatalf("sequential ReadRemote(%d): %v", next, err)
		}
		next = rr.Next
	}
	e.srv.Engine().Settle()
	if n := readtest.MetricValue(t, reg, "tierd_cache_prefetches_total") - before; n == 0 {
		t.Fatal("a sequential ReadRemote reader started no prefetch")
	}
}

// Each error class of the Go API, by errors.Is and errors.As, and the
// missing-copy hook told of a missing object only.
func TestReadRemoteErrors(t *testing.T) {
	var mu sync.Mutex
	var told []remotelog.SegmentMetadata
	e := newEnv(t, DefaultConfig(), WithEngine(remoteread.WithMissingCopyHook(func(m remotelog.SegmentMetadata) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, m)
	})))
	readtest.ReferenceLog(t, e.Rig)
	fin, _ := e.Store.FinishedSegments(e.TP) // [0, 205], [206, 411], [412, 599]
	ctx := context.Background()
	read := func(tp remotelog.TopicPartition, off int64) error {
		_, err := e.srv.Engine().ReadRemote(ctx, tp, off, 1)
		return err
	}
	if err := read(remotelog.TopicPartition{Topic: "t", Partition: 9}, 0); !errors.Is(err, remoteread.ErrNotTiered) {
		t.Errorf("nothing tiered: %v", err)
	}
	for _, tc := range []struct {
		tp  remotelog.TopicPartition
		off int64
	}{{e.TP, -1}, {remotelog.TopicPartition{Partition: 0}, 0}, {remotelog.TopicPartition{Topic: "t", Partition: -1}, 0}} {
		if err := read(tc.tp, tc.off); !errors.Is(err, remoteread.ErrInvalidArgument) {
			t.Errorf("ReadRemote(%v, %d): %v, want remoteread.ErrInvalidArgument", tc.tp, tc.off, err)
		}
	}
	if _, err := e.Store.AdvanceOffsets(e.TP, 100, -1); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{50, 600} {
		var re *remoteread.RangeError
		if err := read(e.TP, off); !errors.As(err, &re) || *re != (remoteread.RangeError{Offset: off, LogStartOffset: 100, HighestTieredOffset: 599}) {
			t.Errorf("ReadRemote(%d): %v, want a remoteread.RangeError of [100, 599]", off, err)
		}
	}
	// A finished copy's .log gone: remoteread.ErrDataLoss over rsm.ErrNotFound, the
	// copy named, the hook told.
	if err := e.Bucket.Delete(ctx, e.Mgr.Key(fin[2], ".log")); err != nil {
		t.Fatal(err)
	}
	err := read(e.TP, 500)
	if !errors.Is(err, remoteread.ErrDataLoss) || !errors.Is(err, rsm.ErrNotFound) || !strings.Contains(err.Error(), fin[2].ID.String()) {
		t.Errorf("missing .log: %v", err)
	}
	mu.Lock()
	if len(told) != 1 || told[0].ID != fin[2].ID {
		t.Errorf("hook told %+v, want copy %s", told, fin[2].ID)
	}
	mu.Unlock()
	// A corrupt offset index (7 bytes): remoteread.ErrDataLoss over ErrCorrupt, and
	// DATA_LOSS over gRPC; no hook.
	if err := e.Bucket.Upload(ctx, e.Mgr.Key(fin[0], kafkalog.IndexSuffix), bytes.NewReader(make([]byte, 7)), 7); err != nil {
		t.Fatal(err)
	}
	if err := read(e.TP, 150); !errors.Is(err, remoteread.ErrDataLoss) || !errors.Is(err, kafkalog.ErrCorrupt) {
		t.Errorf("corrupt offset index: %v", err)
	}
	if _, err := e.fetch(150, 1); status.Code(err) != codes.DataLoss {
		t.Errorf("corrupt offset index over gRPC: %v", err)
	}
	// Offsets no copy covers.
	if _, err := e.Store.UpdateState(e.TP, fin[1].StartOffset, fin[1].ID, remotelog.DeleteSegmentStarted); err != nil {
		t.Fatal(err)
	}
	if err := read(e.TP, 300); !errors.Is(err, remoteread.ErrDataLoss) || !strings.Contains(err.Error(), "offsets 300 to 411 have no tiered copy") {
		t.Errorf("hole: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 {
		t.Errorf("hook told of %d copies, want the missing one only", len(told))
	}
}

// Over gRPC, READ_COMMITTED lists the aborted transactions overlapping the
// records returned (through the zero-copy codec: more than 32 KiB of
// records), READ_UNCOMMITTED none; the records are the same.
func TestFetchIsolation(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.TxnLog(t, e.Rig)
	ctx := context.Background()
	get := func(off int64, iso tierdpb.IsolationLevel) *tierdpb.FetchResponse {
		t.Helper()
		resp, err := e.api.Fetch(ctx, &tierdpb.FetchRequest{Topic: "t", Offset: off, MaxBytes: 1 << 20, IsolationLevel: iso})
		if err != nil {
			t.Fatalf("Fetch(%d, %v): %v", off, iso, err)
		}
		return resp
	}
	rc, ru := get(0, tierdpb.IsolationLevel_READ_COMMITTED), get(0, tierdpb.IsolationLevel_READ_UNCOMMITTED)
	if len(rc.Records) < zeroCopyMin || !bytes.Equal(rc.Records, ru.Records) || rc.NextOffset != 10 || ru.NextOffset != 10 {
		t.Fatalf("records: %d and %d bytes, next %d and %d", len(rc.Records), len(ru.Records), rc.NextOffset, ru.NextOffset)
	}
	var got [][2]int64
	for _, a := range rc.AbortedTransactions {
		got = append(got, [2]int64{a.ProducerId, a.FirstOffset})
	}
	if want := [][2]int64{{7, 2}, {8, 7}}; len(got) != 2 || !slices.Equal(got, want) {
		t.Errorf("READ_COMMITTED aborted transactions %v, want %v", got, want)
	}
	if len(ru.AbortedTransactions) != 0 {
		t.Errorf("READ_UNCOMMITTED aborted transactions %v", ru.AbortedTransactions)
	}
	if r := get(16, tierdpb.IsolationLevel_READ_COMMITTED); len(r.AbortedTransactions) != 0 || r.NextOffset != 20 {
		t.Errorf("fetch at 16: %v, next %d", r.AbortedTransactions, r.NextOffset)
	}
	_, err := e.api.Fetch(ctx, &tierdpb.FetchRequest{Topic: "t", Offset: 0, MaxBytes: 1, IsolationLevel: 7})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown isolation level: %v", err)
	}
}
