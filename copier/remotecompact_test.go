package copier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/copier/remotecompact"
	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/compact"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/kafkalog/snapshot"
	"github.com/tierd/tierd/internal/remotelog"
)

// checkModel fails unless the remote tier reads back as the history's
// key -> latest value map up to end.
func checkModel(t *testing.T, what string, rr remoteRead, h *history, end int64) {
	t.Helper()
	if got, want := rr.latest(), h.latest(end); !maps.Equal(got, want) {
		t.Fatalf("%s: remote tier reads %v, want %v", what, got, want)
	}
}

// TestRemoteCompactionMerges tiers four segments of a compacted topic
// (120 updates of 10 keys), lets one pass merge their copies, and checks
// on a filesystem bucket and on MinIO: the same key -> latest value map
// read back before and after, offsets in order, one copy covering the
// four copies' whole range that names them, its indexes pointing at its
// batches, the four copies deleted with their proof, and the metrics.
func TestRemoteCompactionMerges(t *testing.T) {
	for name, newBucket := range bucketsUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, compactedConfig(DefaultRemoteCompaction()), newBucket(t))
			logs, _ := r.observe()
			h := &history{}
			ts := r.now.UnixMilli()
			for i := 0; i < 4; i++ {
				h.writeKeyedSegment(t, r.dir(), ts, 3, nil, updates(int64(len(h.updates)), 30, 10)...)
			}
			h.activeSegment(t, r.dir())
			if n := r.sync(); n != 4 {
				t.Fatalf("copied %d, want 4", n)
			}
			before := readRemote(t, r)
			checkModel(t, "copied", before, h, 120)
			if len(before.rows) != 4 || len(before.recs) != 120 {
				t.Fatalf("before the merge: %d copies, %d records", len(before.rows), len(before.recs))
			}
			// Copies finished in the pass's own millisecond wait for the next.
			r.now = r.now.Add(time.Second)
			r.sync()
			after := readRemote(t, r)
			checkModel(t, "merged", after, h, 120)
			if len(after.rows) != 1 || len(after.recs) != 10 {
				t.Fatalf("after the merge: %d copies, %d records; want 1 copy of the 10 latest", len(after.rows), len(after.recs))
			}
			m := after.rows[0]
			var oldIDs []remotelog.SegmentID
			var oldBytes int64
			for _, o := range before.rows {
				oldIDs, oldBytes = append(oldIDs, o.ID), oldBytes+o.SizeInBytes
			}
			if m.StartOffset != 0 || m.EndOffset != 119 || !slices.Equal(m.CompactionOf, oldIDs) || m.MaxTimestampMs != ts {
				t.Fatalf("merged row %+v, want [0, 119] naming %v", m, oldIDs)
			}
			mf, err := r.mgr.ReadManifest(context.Background(), r.mgr.Key(m, ".manifest.json"))
			if err != nil || !slices.Equal(mf.CompactionOf, oldIDs) {
				t.Fatalf("manifest %+v, %v: want compactionOf %v", mf, err, oldIDs)
			}
			checkIndexes(t, r, m)
			if st := r.states(); st[remotelog.CopySegmentFinished] != 1 || st[remotelog.DeleteSegmentFinished] != 4 || len(st) != 2 {
				t.Fatalf("row states %v", st)
			}
			for _, k := range r.objects() {
				if !strings.Contains(k, m.ID.String()) {
					t.Fatalf("object %s of a replaced copy left", k)
				}
			}
			proof := fmt.Sprintf("superseded by copy %s COPY_SEGMENT_FINISHED covering [0, 119]", m.ID)
			dels := logs.with("deleting a copy merged by remote compaction")
			if len(dels) != 4 {
				t.Fatalf("%d deletes logged, want 4", len(dels))
			}
			for _, d := range dels {
				if d.attrs["proof"] != proof {
					t.Fatalf("delete logged with proof %q, want %q", d.attrs["proof"], proof)
				}
			}
			merges, merged := compactCounter(t, r.c, "merges_total"), compactCounter(t, r.c, "copies_merged_total")
			reclaimed, dropped := compactCounter(t, r.c, "reclaimed_bytes_total"), compactCounter(t, r.c, "records_dropped_total")
			if merges != 1 || merged != 4 || reclaimed != float64(oldBytes-m.SizeInBytes) || dropped != 110 {
				t.Fatalf("metrics: merges %v, merged %v, reclaimed %v (want %d), dropped %v", merges, merged, reclaimed, oldBytes-m.SizeInBytes, dropped)
			}
			// Nothing left to merge: the next pass changes nothing.
			r.now = r.now.Add(time.Second)
			r.sync()
			if again := readRemote(t, r); len(again.rows) != 1 || again.rows[0].ID != m.ID {
				t.Fatalf("a second pass changed the copies: %+v", again.rows)
			}
		})
	}
}

// checkIndexes checks a copy's offset index entries point at the start of
// the batch ending at their offset, and its time index ends with the max
// timestamp.
func checkIndexes(t *testing.T, r *rig, m remotelog.SegmentMetadata) {
	t.Helper()
	ctx := context.Background()
	raw, err := r.mgr.FetchIndex(ctx, m, remotelog.OffsetIndex)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := index.ParseOffsetIndex(raw, m.StartOffset)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range offs {
		rc, err := r.mgr.FetchLogSegment(ctx, m, int64(e.Position), -1)
		if err != nil {
			t.Fatal(err)
		}
		hdr := make([]byte, batch.HeaderSize)
		_, err = rc.Read(hdr)
		rc.Close()
		b, perr := batch.ParseHeader(hdr, int64(e.Position))
		if err != nil || perr != nil || b.LastOffset != e.Offset {
			t.Fatalf("offset index entry %+v: batch %+v, %v %v", e, b, err, perr)
		}
	}
	raw, err = r.mgr.FetchIndex(ctx, m, remotelog.TimeIndex)
	if err != nil {
		t.Fatal(err)
	}
	times, err := index.ParseTimeIndex(raw, m.StartOffset)
	if err != nil || len(times) == 0 || times[len(times)-1].Timestamp != m.MaxTimestampMs {
		t.Fatalf("time index %+v, %v; want it to end at %d", times, err, m.MaxTimestampMs)
	}
}

// TestRemoteCompactionTombstones follows a tombstone through three merges
// at the log start: the first keeps it and sets its delete horizon
// (delete.retention.ms later), a merge before the horizon keeps it, one
// past the horizon drops it; the older value of its key goes at the
// first merge.
func TestRemoteCompactionTombstones(t *testing.T) {
	rc := DefaultRemoteCompaction()
	rc.DeleteRetentionMs, rc.MinCleanableDirtyRatio = 10_000, 0.01
	r := newRig(t, compactedConfig(rc), nil)
	h := &history{}
	ts := r.now.UnixMilli()
	h.writeKeyedSegment(t, r.dir(), ts, 2, nil, update{key: "a", value: "1"}, update{key: "b", value: "1"}, update{key: "c", value: "1"})
	h.writeKeyedSegment(t, r.dir(), ts, 2, nil, update{key: "a", value: "2"}, update{key: "b", tomb: true})
	h.activeSegment(t, r.dir())
	step := func(what string, us ...update) remoteRead {
		t.Helper()
		if len(us) > 0 {
			h.writeKeyedSegment(t, r.dir(), r.now.UnixMilli(), 2, nil, us...)
			h.activeSegment(t, r.dir())
		}
		r.sync() // copies the new segment
		r.now = r.now.Add(time.Second)
		r.sync() // merges
		rr := readRemote(t, r)
		checkModel(t, what, rr, h, int64(len(h.updates)))
		if len(rr.rows) != 1 || rr.rows[0].StartOffset != 0 {
			t.Fatalf("%s: copies %+v, want one merged from the log start", what, rr.rows)
		}
		return rr
	}
	first := step("first merge")
	horizon := r.now.UnixMilli() + 10_000
	if got := first.tombstones(); !slices.Equal(got, []string{"b"}) || len(first.recs) != 3 {
		t.Fatalf("first merge: tombstones %v, %d records; want b's kept and a=1, b=1 gone", got, len(first.recs))
	}
	if h, ok := tombstoneHorizon(t, r, first.rows[0]); !ok || h != horizon {
		t.Fatalf("tombstone's batch horizon %d %v, want %d", h, ok, horizon)
	}
	if got := step("before the horizon", update{key: "d", value: "1"}).tombstones(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("before the horizon: tombstones %v, want b's kept", got)
	}
	r.now = time.UnixMilli(horizon)
	if got := step("past the horizon", update{key: "e", value: "1"}).tombstones(); len(got) != 0 {
		t.Fatalf("past the horizon: tombstones %v, want none", got)
	}
}

// tombstoneHorizon returns the delete horizon of the batch holding the
// first tombstone of a copy.
func tombstoneHorizon(t *testing.T, r *rig, m remotelog.SegmentMetadata) (int64, bool) {
	t.Helper()
	rc, err := r.mgr.FetchLogSegment(context.Background(), m, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data := make([]byte, m.SizeInBytes)
	if _, err := rc.Read(data); err != nil && len(data) > 0 {
		t.Fatal(err)
	}
	for pos := 0; pos < len(data); {
		b, err := batch.ParseHeader(data[pos:], 0)
		if err != nil {
			t.Fatal(err)
		}
		recs, _ := batch.Records(data[pos:pos+int(b.Size)], codec.Kafka)
		for _, rec := range recs {
			if rec.Value == nil {
				return compact.DeleteHorizon(b)
			}
		}
		pos += int(b.Size)
	}
	return 0, false
}

// TestRemoteCompactionKeepsTombstonesAfterTheLogStart merges a run that
// does not start at the log start (the first copy is too large to join
// it): a tombstone whose delete horizon passed long ago (set by the
// broker's cleaner before the copy) stays, since the first copy still
// holds an older value of its key, which would otherwise be read again.
func TestRemoteCompactionKeepsTombstonesAfterTheLogStart(t *testing.T) {
	rc := DefaultRemoteCompaction()
	rc.MinCleanableDirtyRatio = 0.01
	r := newRig(t, compactedConfig(rc), nil)
	h := &history{}
	ts := r.now.UnixMilli()
	cleaned := func(raw []byte) []byte { // as a broker's cleaner leaves it, horizon ts-1000
		m := compact.NewOffsetMap(0, nil, nil)
		f := compact.NewFilter(m, compact.Options{NowMs: ts - 1000})
		out, _, err := f.Batch(nil, raw)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	h.writeKeyedSegment(t, r.dir(), ts, 1, nil, update{key: "k", value: strings.Repeat("v", 2000)})
	h.writeKeyedSegment(t, r.dir(), ts, 1, nil, update{key: "x", value: "1"}, update{key: "x", value: "2"})
	h.writeKeyedSegment(t, r.dir(), ts, 1, cleaned, update{key: "k", tomb: true})
	h.activeSegment(t, r.dir())
	r.sync()
	fin, _ := r.store.FinishedSegments(r.tp)
	if len(fin) != 3 {
		t.Fatalf("%d copies, want 3", len(fin))
	}
	if hz, ok := tombstoneHorizon(t, r, fin[2]); !ok || hz != ts-1000 {
		t.Fatalf("the tombstone's copy has horizon %d %v, want %d", hz, ok, ts-1000)
	}
	// The run [1, 3] fits; the first copy with it does not.
	r.c.cfg.RemoteCompaction.SegmentBytes = fin[1].SizeInBytes + fin[2].SizeInBytes
	r.now = r.now.Add(time.Second)
	r.sync()
	rr := readRemote(t, r)
	if len(rr.rows) != 2 || rr.rows[1].StartOffset != 1 || rr.rows[1].EndOffset != 3 || rr.rows[1].CompactionOf == nil {
		t.Fatalf("copies %+v, want the first and one merged over [1, 3]", rr.rows)
	}
	checkModel(t, "merged after the log start", rr, h, 4)
	if got := rr.tombstones(); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("tombstones %v, want k's kept", got)
	}
}

// failingStore is a metadata store whose state changes to a given state
// fail while fail is set, as a crash right before them would leave the
// rows.
type failingStore struct {
	MetadataStore
	to   remotelog.SegmentState
	fail bool
}

func (f *failingStore) UpdateState(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID, to remotelog.SegmentState) (remotelog.SegmentMetadata, error) {
	if f.fail && to == f.to {
		return remotelog.SegmentMetadata{}, errors.New("injected: the process died here")
	}
	return f.MetadataStore.UpdateState(tp, start, id, to)
}

func (f *failingStore) UpdateStates(tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, to remotelog.SegmentState) ([]remotelog.SegmentMetadata, error) {
	if f.fail && to == f.to {
		return nil, errors.New("injected: the process died here")
	}
	return f.MetadataStore.UpdateStates(tp, rows, to)
}

// TestRemoteCompactionCrashSteps leaves the rows as a crash at each step
// would, and checks that the remote tier reads back the same map
// throughout and that the next pass finishes or undoes the merge: a
// merged copy uploaded but not finished (killed at compact.uploaded) is
// deleted and the merge made again; a finished merged copy whose old
// copies are still finished (killed at compact.finished) hides them at
// once, and the next pass deletes them with their proof.
func TestRemoteCompactionCrashSteps(t *testing.T) {
	for _, step := range []remotelog.SegmentState{remotelog.CopySegmentFinished, remotelog.DeleteSegmentStarted} {
		t.Run(step.String(), func(t *testing.T) {
			r := newRig(t, compactedConfig(DefaultRemoteCompaction()), nil)
			fs := &failingStore{MetadataStore: r.store, to: step}
			logs, _ := r.observe()
			c, err := New(r.c.cfg, fs, r.mgr, WithClock(func() time.Time { return r.now }), WithLogger(r.c.log))
			if err != nil {
				t.Fatal(err)
			}
			r.c = c
			h := &history{}
			for i := 0; i < 3; i++ {
				h.writeKeyedSegment(t, r.dir(), r.now.UnixMilli(), 4, nil, updates(int64(len(h.updates)), 20, 6)...)
			}
			h.activeSegment(t, r.dir())
			r.sync()
			old := readRemote(t, r)
			r.now = r.now.Add(time.Second)
			fs.fail = true
			if _, err := r.c.Sync(context.Background()); err == nil || !errors.Is(err, remotecompact.ErrCompaction) {
				t.Fatalf("pass with the injected crash: %v", err)
			}
			fs.fail = false
			mid := readRemote(t, r)
			checkModel(t, "after the crash", mid, h, 60)
			rows, _ := r.store.Segments(r.tp)
			var merged remotelog.SegmentMetadata
			for _, row := range rows {
				if row.CompactionOf != nil {
					merged = row
				}
			}
			switch step {
			case remotelog.CopySegmentFinished:
				if merged.State != remotelog.CopySegmentStarted || len(mid.rows) != 3 {
					t.Fatalf("merged row %s, %d copies read; want STARTED and the 3 old ones", merged.State, len(mid.rows))
				}
				if missing, _ := r.mgr.MissingObjects(context.Background(), merged); len(missing) != 0 {
					t.Fatalf("the unfinished merged copy lacks %v: the crash was meant after its upload", missing)
				}
			case remotelog.DeleteSegmentStarted:
				if merged.State != remotelog.CopySegmentFinished || len(mid.rows) != 1 || mid.rows[0].ID != merged.ID {
					t.Fatalf("copies read %+v; want only the finished merged one", mid.rows)
				}
				if st := r.states(); st[remotelog.CopySegmentFinished] != 4 {
					t.Fatalf("row states %v, want the merged copy and the 3 it replaces finished", st)
				}
			}
			r.now = r.now.Add(time.Second)
			r.sync()
			final := readRemote(t, r)
			checkModel(t, "after the restart", final, h, 60)
			if len(final.rows) != 1 || !slices.Equal(final.rows[0].CompactionOf, []remotelog.SegmentID{old.rows[0].ID, old.rows[1].ID, old.rows[2].ID}) {
				t.Fatalf("copies after the restart %+v", final.rows)
			}
			for _, k := range r.objects() {
				if !strings.Contains(k, final.rows[0].ID.String()) {
					t.Fatalf("object %s left", k)
				}
			}
			if step == remotelog.DeleteSegmentStarted {
				proof := fmt.Sprintf("superseded by copy %s COPY_SEGMENT_FINISHED covering [0, 59]", merged.ID)
				dels := logs.with("deleting superseded copy")
				if len(dels) != 3 || dels[0].attrs["proof"] != proof {
					t.Fatalf("deletes after the restart %+v, want 3 with proof %q", dels, proof)
				}
			}
		})
	}
}

// TestRemoteCompactionOnlyCompactedTopics checks that nothing is merged
// for a topic whose cleanup.policy is delete, nor with remote compaction
// off, nor while the copies' segments are still on local disk.
func TestRemoteCompactionOnlyCompactedTopics(t *testing.T) {
	deletePolicy := compactedConfig(DefaultRemoteCompaction())
	del := "delete"
	deletePolicy.Topics["orders"] = topics.TopicConfig{CleanupPolicy: &del, Retention: topics.Retention{LocalRetentionMs: ptr(0)}}
	off := compactedConfig(RemoteCompaction{})
	local := compactedConfig(DefaultRemoteCompaction())
	compactOnly := "compact"
	local.Topics["orders"] = topics.TopicConfig{CleanupPolicy: &compactOnly} // local retention: retention.ms, 7 days
	for name, cfg := range map[string]Config{"cleanup.policy=delete": deletePolicy, "remote compaction off": off, "segments still local": local} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, cfg, nil)
			h := &history{}
			for i := 0; i < 3; i++ {
				h.writeKeyedSegment(t, r.dir(), r.now.UnixMilli(), 4, nil, updates(int64(len(h.updates)), 20, 6)...)
			}
			h.activeSegment(t, r.dir())
			r.sync()
			r.now = r.now.Add(time.Second)
			r.sync()
			if rr := readRemote(t, r); len(rr.rows) != 3 {
				t.Fatalf("%d copies, want the 3 copies unmerged", len(rr.rows))
			}
		})
	}
}

// TestRemoteCompactionTransactions merges two copies holding an aborted
// and a committed transaction: the aborted records go (they were never
// readable), the markers stay, the .txnindex keeps the aborted
// transaction whose marker the copy still holds, and the producer
// snapshot is the last copy's.
func TestRemoteCompactionTransactions(t *testing.T) {
	r := newRig(t, compactedConfig(DefaultRemoteCompaction()), nil)
	ts := r.now.UnixMilli()
	dir := r.dir()
	rec := func(k, v string) batch.Record { return batch.Record{Timestamp: ts, Key: []byte(k), Value: []byte(v)} }
	mkBatch := func(dst []byte, base int64, pid int64, control bool, recs ...batch.Record) []byte {
		p := batch.NewParams(base, 0)
		if pid >= 0 {
			p.Transactional, p.Control, p.ProducerID, p.ProducerEpoch, p.BaseSequence = true, control, pid, 0, 0
		}
		out, err := batch.AppendBatch(dst, p, recs, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	marker := func(kind byte) batch.Record {
		return batch.Record{Timestamp: ts, Key: []byte{0, 0, 0, kind}, Value: []byte{0, 0, 0, 0, 0, 0}}
	}
	segA := mkBatch(nil, 0, -1, false, rec("k1", "v1"))
	segA = mkBatch(segA, 1, 7, false, rec("k2", "aborted"), rec("k3", "aborted"))
	segA = mkBatch(segA, 3, 7, true, marker(0)) // ABORT
	segB := mkBatch(nil, 4, -1, false, rec("k1", "v2"))
	segB = mkBatch(segB, 5, 8, false, rec("k4", "committed"))
	segB = mkBatch(segB, 6, 8, true, marker(1)) // COMMIT
	aborted := index.AppendAbortedTxn(nil, index.AbortedTxn{ProducerID: 7, FirstOffset: 1, LastOffset: 3, LastStableOffset: 4})
	snap := snapshot.Append(nil, []snapshot.Entry{{ProducerID: 8, LastSequence: 0, LastOffset: 5, Timestamp: ts, CurrentTxnFirstOffset: -1}})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		kafkalog.FileName(0, kafkalog.LogSuffix): segA, kafkalog.FileName(0, kafkalog.TxnIndexSuffix): aborted,
		kafkalog.FileName(4, kafkalog.LogSuffix): segB, kafkalog.FileName(7, kafkalog.SnapshotSuffix): snap,
		kafkalog.FileName(0, kafkalog.IndexSuffix): nil, kafkalog.FileName(0, kafkalog.TimeIndexSuffix): nil,
		kafkalog.FileName(4, kafkalog.IndexSuffix): nil, kafkalog.FileName(4, kafkalog.TimeIndexSuffix): nil,
	} {
		writeFile(t, filepath.Join(dir, name), string(data))
	}
	writeSegment(t, dir, 7, nil, nil, 0)
	writeCleanerCheckpoint(t, r.logDir, map[remotelog.TopicPartition]int64{r.tp: 7}) // the broker's cleaner passed both
	r.sync()
	r.now = r.now.Add(time.Second)
	r.sync()
	rr := readRemote(t, r)
	if len(rr.rows) != 1 || rr.rows[0].CompactionOf == nil {
		t.Fatalf("copies %+v, want one merged", rr.rows)
	}
	if got, want := rr.latest(), map[string]string{"k1": "v2", "k4": "committed"}; !maps.Equal(got, want) || len(rr.recs) != 2 {
		t.Fatalf("read %v in %d records, want %v: aborted records gone, k1=v1 gone", got, len(rr.recs), want)
	}
	m := rr.rows[0]
	ctx := context.Background()
	raw, err := r.mgr.FetchIndex(ctx, m, remotelog.TransactionIndex)
	if err != nil {
		t.Fatal(err)
	}
	if txns, err := index.ParseTxnIndex(raw); err != nil || len(txns) != 1 || txns[0].ProducerID != 7 || txns[0].LastOffset != 3 {
		t.Fatalf("merged .txnindex %+v, %v; want the aborted transaction of producer 7", txns, err)
	}
	if got, err := r.mgr.FetchIndex(ctx, m, remotelog.ProducerSnapshot); err != nil || !bytes.Equal(got, snap) {
		t.Fatalf("merged producer snapshot %x, %v; want the last copy's", got, err)
	}
	// Both markers stay: the transactions' batches were read in this merge.
	markers := 0
	rc, _ := r.mgr.FetchLogSegment(ctx, m, 0, -1)
	data, _ := io.ReadAll(rc)
	rc.Close()
	for pos := 0; pos < len(data); {
		b, err := batch.ParseHeader(data[pos:], 0)
		if err != nil {
			t.Fatal(err)
		}
		if b.Control {
			markers++
		}
		pos += int(b.Size)
	}
	if markers != 2 {
		t.Fatalf("%d markers in the merged copy, want 2", markers)
	}
}
