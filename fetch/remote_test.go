package fetch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/readtest"
	"github.com/tierd/tierd/internal/remotelog"
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

// Past remote.fetch.max.wait.ms without the first batch: remoteread.ErrStillLoading.
func TestReadRemoteStillLoading(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxWaitMs = 50
	cfg.PrefetchBytes = 0
	e := newEnv(t, cfg)
	readtest.ReferenceLog(t, e.Rig)
	gate := make(chan struct{})
	e.Bucket.Gate.Store(&gate)
	t.Cleanup(func() { close(gate) })
	if _, err := e.srv.Engine().ReadRemote(context.Background(), e.TP, 500, 1); !errors.Is(err, remoteread.ErrStillLoading) {
		t.Fatalf("read of a held object: %v, want remoteread.ErrStillLoading", err)
	}
}

// Partitions and offsets come from the metadata store: a partition
// recorded with nothing tiered is not listed.
func TestRemotePartitionsAndOffsets(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	readtest.ReferenceLog(t, e.Rig)
	if err := e.Store.SetTopicID(e.TP, "AAAAAAAAAAAAAAAAAAAAAQ"); err != nil {
		t.Fatal(err)
	}
	empty := remotelog.TopicPartition{Topic: "u", Partition: 3}
	if err := e.Store.EnsurePartition(empty, 42); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ps, err := e.srv.Engine().RemotePartitions(ctx)
	if err != nil || len(ps) != 1 || ps[0] != (remoteread.RemotePartition{TopicPartition: e.TP, TopicID: "AAAAAAAAAAAAAAAAAAAAAQ"}) {
		t.Fatalf("RemotePartitions: %+v %v", ps, err)
	}
	for _, tc := range []struct {
		tp           remotelog.TopicPartition
		ok           bool
		lso, highest int64
	}{{e.TP, true, 0, 599}, {empty, true, 42, -1}, {remotelog.TopicPartition{Topic: "v"}, false, 0, -1}} {
		offs, ok, err := e.srv.Engine().RemoteOffsets(ctx, tc.tp)
		if err != nil || ok != tc.ok || offs.LogStartOffset != tc.lso || offs.HighestTieredOffset != tc.highest {
			t.Errorf("RemoteOffsets(%v) = %+v %v %v", tc.tp, offs, ok, err)
		}
	}
}

// txnIndexBytes encodes .txnindex entries in Kafka's format: 34 bytes of
// version (int16), producer id, first offset, last offset and last stable
// offset (int64 each), big-endian.
func txnIndexBytes(txns ...index.AbortedTxn) []byte {
	var out []byte
	for _, x := range txns {
		out = binary.BigEndian.AppendUint16(out, uint16(x.Version))
		for _, v := range []int64{x.ProducerID, x.FirstOffset, x.LastOffset, x.LastStableOffset} {
			out = binary.BigEndian.AppendUint64(out, uint64(v))
		}
	}
	return out
}

// writeSegment writes a segment's .log from whole entries, with the
// offset and time indexes a broker writes (an entry per batch after the
// first), and its .txnindex when txns are given.
func writeSegment(t *testing.T, dir string, base int64, txns []index.AbortedTxn, entries ...[]byte) {
	t.Helper()
	var log []byte
	ib := index.NewBuilder(base, 0)
	for _, en := range entries {
		h, err := batch.ParseHeader(en, int64(len(log)))
		if err != nil {
			t.Fatal(err)
		}
		ib.Add(h.LastOffset, h.MaxTimestamp, h.Position, h.Size)
		log = append(log, en...)
	}
	if len(entries) > 0 {
		ib.Seal()
	}
	offs, err := index.EncodeOffsets(base, ib.Offsets)
	if err != nil {
		t.Fatal(err)
	}
	times, err := index.EncodeTimes(base, ib.Times)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{kafkalog.LogSuffix: log, kafkalog.IndexSuffix: offs, kafkalog.TimeIndexSuffix: times}
	if txns != nil {
		files[kafkalog.TxnIndexSuffix] = txnIndexBytes(txns...)
	}
	for suffix, data := range files {
		if err := os.WriteFile(filepath.Join(dir, kafkalog.FileName(base, suffix)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// entry builds one v2 batch of n records from base, 5000-byte values and
// timestamps ts(offset); pid >= 0 makes it transactional.
func entry(t *testing.T, base int64, n int, pid int64, ts func(int64) int64) []byte {
	t.Helper()
	p := batch.NewParams(base, 0)
	if pid >= 0 {
		p.Transactional, p.ProducerID, p.ProducerEpoch, p.BaseSequence = true, pid, 0, 0
	}
	recs := make([]batch.Record, n)
	for i := range recs {
		off := base + int64(i)
		recs[i] = batch.Record{Timestamp: ts(off), Value: bytes.Repeat([]byte{byte(off)}, 5000)}
	}
	b, err := batch.AppendBatch(nil, p, recs, codec.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// marker builds a transaction's control batch (Kafka's EndTxnMarker: key
// version and type, 0 abort / 1 commit; value version and coordinator
// epoch).
func marker(t *testing.T, off, pid int64, commit bool) []byte {
	t.Helper()
	p := batch.NewParams(off, 0)
	p.Transactional, p.Control, p.ProducerID, p.ProducerEpoch, p.BaseSequence = true, true, pid, 0, -1
	typ := uint16(0)
	if commit {
		typ = 1
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), typ)
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 0)
	b, err := batch.AppendBatch(nil, p, []batch.Record{{Timestamp: 1000 + off, Key: key, Value: val}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// txnLog writes and tiers four segments with transactions, as a broker
// lays them out (an aborted transaction's .txnindex entry goes with the
// segment holding its abort marker):
//
//	[0, 9]    0-1, pid 7 2-4, 5, abort 7 at 6, pid 8 7, 8-9  .txnindex {7: 2-6, LSO 7}
//	[10, 19]  pid 8 10-11, abort 8 at 12, pid 9 13-14, commit 9 at 15, 16-19
//	                                                          .txnindex {8: 7-12, LSO 13}
//	[20, 29]  20-29                                           no .txnindex
//	[30, 39]  pid 10 30-31, abort 10 at 32, 33-39             .txnindex {10: 30-32, LSO 33}
func txnLog(t *testing.T, e *env) {
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ts := func(off int64) int64 { return 1000 + off }
	none := int64(-1)
	writeSegment(t, dir, 0, []index.AbortedTxn{{ProducerID: 7, FirstOffset: 2, LastOffset: 6, LastStableOffset: 7}},
		entry(t, 0, 2, none, ts), entry(t, 2, 3, 7, ts), entry(t, 5, 1, none, ts), marker(t, 6, 7, false),
		entry(t, 7, 1, 8, ts), entry(t, 8, 2, none, ts))
	writeSegment(t, dir, 10, []index.AbortedTxn{{ProducerID: 8, FirstOffset: 7, LastOffset: 12, LastStableOffset: 13}},
		entry(t, 10, 2, 8, ts), marker(t, 12, 8, false), entry(t, 13, 2, 9, ts), marker(t, 15, 9, true), entry(t, 16, 4, none, ts))
	writeSegment(t, dir, 20, nil, entry(t, 20, 10, none, ts))
	writeSegment(t, dir, 30, []index.AbortedTxn{{ProducerID: 10, FirstOffset: 30, LastOffset: 32, LastStableOffset: 33}},
		entry(t, 30, 2, 10, ts), marker(t, 32, 10, false), entry(t, 33, 7, none, ts))
	writeSegment(t, dir, 40, nil)
	e.TierEach(dir, func(meta *remotelog.SegmentMetadata, files *rsm.SegmentFiles) {
		p := filepath.Join(dir, kafkalog.FileName(meta.StartOffset, kafkalog.TxnIndexSuffix))
		if _, err := os.Stat(p); err == nil {
			files.TxnIndex = p
			meta.TxnIndexPresent = true
		}
	})
}

func pairs(txns []index.AbortedTxn) [][2]int64 {
	out := [][2]int64{}
	for _, x := range txns {
		out = append(out, [2]int64{x.ProducerID, x.FirstOffset})
	}
	return out
}

// Aborted transactions come from the copies' transaction indexes: those
// overlapping [from, to), found in the copy holding from and the copies
// after it until an entry's last stable offset reaches to; a copy without
// a transaction index makes no GET; parsed indexes are cached.
func TestRemoteAbortedTxns(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, DefaultConfig(), WithRegisterer(reg))
	txnLog(t, e)
	ctx := context.Background()
	txnGets := func() int64 { return e.Bucket.TxnGets.Load() }
	indexGets := func() float64 { return readtest.MetricValue(t, reg, "tierd_fetch_index_gets_total") }
	for _, tc := range []struct {
		from, to  int64
		want      [][2]int64 // producer id, first offset
		gets      int64      // .txnindex GETs, cold
		indexGets float64
	}{
		// Copy [20, 29] has no transaction index: only [30, 39]'s is read.
		{20, 35, [][2]int64{{10, 30}}, 1, 1},
		// pid 8's abort marker is in the next copy: it is read too, and
		// its entry's LSO 13 >= 10 ends the search.
		{0, 10, [][2]int64{{7, 2}, {8, 7}}, 2, 2},
		{7, 8, [][2]int64{{8, 7}}, 0, 0},
		{12, 13, [][2]int64{{8, 7}}, 0, 0},
		{16, 30, [][2]int64{}, 0, 0},
		{0, 40, [][2]int64{{7, 2}, {8, 7}, {10, 30}}, 0, 0},
		{40, 50, [][2]int64{}, 0, 0},
		{5, 5, [][2]int64{}, 0, 0},
	} {
		g, ig := txnGets(), indexGets()
		txns, err := e.srv.Engine().RemoteAbortedTxns(ctx, e.TP, tc.from, tc.to)
		if err != nil {
			t.Fatalf("RemoteAbortedTxns(%d, %d): %v", tc.from, tc.to, err)
		}
		if got := pairs(txns); len(got) != len(tc.want) || (len(got) > 0 && !equalPairs(got, tc.want)) {
			t.Errorf("RemoteAbortedTxns(%d, %d) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
		if n, in := txnGets()-g, indexGets()-ig; n != tc.gets || in != tc.indexGets {
			t.Errorf("RemoteAbortedTxns(%d, %d): %d .txnindex GETs, %v index loads; want %d, %v", tc.from, tc.to, n, in, tc.gets, tc.indexGets)
		}
	}
	fin, _ := e.Store.FinishedSegments(e.TP)
	if txns, _ := e.srv.Engine().RemoteAbortedTxns(ctx, e.TP, 0, 10); txns[0].LastOffset != 6 || txns[1].LastOffset != 12 || txns[1].LastStableOffset != 13 {
		t.Errorf("entries %+v", txns)
	}
	if _, err := e.srv.Engine().RemoteAbortedTxns(ctx, e.TP, -1, 10); !errors.Is(err, remoteread.ErrInvalidArgument) {
		t.Errorf("negative from: %v", err)
	}
	if _, err := e.srv.Engine().RemoteAbortedTxns(ctx, remotelog.TopicPartition{Topic: "x"}, 0, 10); !errors.Is(err, remoteread.ErrNotTiered) {
		t.Errorf("unknown partition: %v", err)
	}
	// A finished copy's transaction index gone: data loss.
	e.srv.Engine().DropCaches(true)
	if err := e.Bucket.Delete(ctx, e.Mgr.Key(fin[3], kafkalog.TxnIndexSuffix)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Engine().RemoteAbortedTxns(ctx, e.TP, 30, 31); !errors.Is(err, remoteread.ErrDataLoss) || !errors.Is(err, rsm.ErrNotFound) {
		t.Errorf("missing .txnindex: %v", err)
	}
}

func equalPairs(a, b [][2]int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Over gRPC, READ_COMMITTED lists the aborted transactions overlapping the
// records returned (through the zero-copy codec: more than 32 KiB of
// records), READ_UNCOMMITTED none; the records are the same.
func TestFetchIsolation(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	txnLog(t, e)
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
	if want := [][2]int64{{7, 2}, {8, 7}}; len(got) != 2 || !equalPairs(got, want) {
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
