package copier

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/filesystem"
)

// tailRig is a rig on a filesystem bucket tiering topic "orders" as
// compacted, with local segments kept after their copy unless keep is
// false.
func tailRig(t *testing.T, keepLocal bool) *rig {
	t.Helper()
	cfg := compactedConfig(RemoteCompaction{})
	if keepLocal {
		tc := cfg.Topics["orders"]
		tc.Retention.LocalRetentionMs = ptr(-1)
		cfg.Topics["orders"] = tc
	}
	b, err := filesystem.New(filesystem.Config{Dir: filepath.Join(t.TempDir(), "bucket")})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, cfg, b)
	if err := os.MkdirAll(r.dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

// removeSegment removes a local segment's .log and indexes.
func removeSegment(dir string, base int64) {
	for _, suffix := range []string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix, kafkalog.TxnIndexSuffix} {
		os.Remove(filepath.Join(dir, kafkalog.FileName(base, suffix)))
	}
}

// TestCompactedTailCopy: segments 0 and 10 of a compacted topic are
// copied (segment 10 holds k's tombstone at 15 and a12 at 12) and kept
// locally. The broker's cleaner, past the tombstone's delete horizon,
// merges segment 10 with the new segment 20 (which updates a12 at 22
// and writes a21 at 20 and again at 21) into one segment at 10 without
// the tombstone and without offsets 12 and 20. The next pass copies only
// that segment's tail: one new copy of offsets [20, 29] holding exactly
// the local batches from offset 21 on, byte for byte, with indexes
// pointing at its own batches; the copy of segment 10 stays and nothing
// is superseded; the partition does not wait; the remote tier reads the
// history's latest map (k absent, a12's new value). A damaged tail copy
// is copied again. Then local retention deletes the merged segment: the
// copy of 10 and the tail copy hold all its offsets.
func TestCompactedTailCopy(t *testing.T) {
	r := tailRig(t, true)
	dir := r.dir()
	ts := r.now.UnixMilli()
	h := &history{updates: make([]update, 30)}
	seg0, seg10, seg20 := map[int64]update{}, map[int64]update{}, map[int64]update{}
	for o := int64(0); o < 30; o++ {
		u := update{key: fmt.Sprintf("a%d", o), value: fmt.Sprintf("v%d", o)}
		switch {
		case o == 3:
			u = update{key: "k", value: "v1"}
		case o == 15:
			u = update{key: "k", tomb: true}
		case o == 22:
			u = update{key: "a12", value: "new"}
		case o == 20:
			u = update{key: "a21", value: "old"}
		}
		h.updates[o] = u
		[]map[int64]update{seg0, seg10, seg20}[o/10][o] = u
	}
	writeRecords(t, dir, 0, ts, seg0)
	writeRecords(t, dir, 10, ts, seg10)
	writeKeyedActive(t, r, 20)
	if n := r.sync(); n != 2 {
		t.Fatalf("copied %d, want segments 0 and 10", n)
	}
	before := r.finished()

	// The cleaner merges 10 and 20 into 10: k's tombstone is past its
	// horizon and a12 at 12 has a newer value at 22.
	merged := map[int64]update{}
	for o, u := range seg10 {
		if !u.tomb && o != 12 {
			merged[o] = u
		}
	}
	maps.Copy(merged, seg20)
	delete(merged, 20) // a21 has a newer value at 21
	removeSegment(dir, 20)
	writeRecords(t, dir, 10, ts, merged)
	writeKeyedActive(t, r, 30)
	r.now = r.now.Add(time.Second)
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d after the merge, want the tail", n)
	}
	if st := r.status(r.tp); st.State != remotelog.TierUpToDate || st.HighestTieredOffset != 29 {
		t.Fatalf("status %s/%s %q, highest tiered %d; want up to date at 29", st.State, st.Reason, st.Detail, st.HighestTieredOffset)
	}
	fin := r.finished()
	if len(fin) != 3 {
		t.Fatalf("%d finished copies, want 3", len(fin))
	}
	for _, b := range before {
		if !slices.ContainsFunc(fin, func(m remotelog.SegmentMetadata) bool { return m.ID == b.ID }) {
			t.Fatalf("copy %d-%d is gone", b.StartOffset, b.EndOffset)
		}
	}
	tail := fin[2]
	if tail.StartOffset != 20 || tail.EndOffset != 29 || !tail.Compacted {
		t.Fatalf("new copy %+v, want [20, 29] compacted", tail)
	}
	if got := remotelog.Supersede(fin); len(got) != 3 {
		t.Fatalf("readers see %d copies, want all 3 (none superseded)", len(got))
	}
	local, err := os.ReadFile(filepath.Join(dir, kafkalog.FileName(10, kafkalog.LogSuffix)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := r.mgr.FetchLogSegment(context.Background(), tail, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	remote, _ := io.ReadAll(rc)
	rc.Close()
	if cut := bytes.Index(local, remote); cut <= 0 || cut+len(remote) != len(local) || batchBaseAt(t, local, cut) != 21 {
		t.Fatalf("tail copy (%d bytes) is not the local segment's batches from offset 21 (local %d bytes, found at %d)", len(remote), len(local), cut)
	}
	checkTailIndex(t, r, tail, remote)
	checkModel(t, "after the tail copy", readRemote(t, r), h, 30)

	// A damaged tail copy is copied again, and the new copy replaces it.
	if _, err := r.store.MarkDamaged(r.tp, tail.StartOffset, tail.ID, damagedChecksum+"test"); err != nil {
		t.Fatal(err)
	}
	r.now = r.now.Add(time.Second)
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d with the tail copy damaged, want the tail again", n)
	}
	r.now = r.now.Add(time.Second)
	r.sync()
	fin = r.finished()
	seen := remotelog.Supersede(fin)
	if len(seen) != 3 || seen[2].StartOffset != 20 || seen[2].ID == tail.ID || seen[2].Damaged != "" {
		t.Fatalf("readers see %+v, want the copies of 0, 10 and a new tail copy", seen)
	}
	checkModel(t, "after the tail was copied again", readRemote(t, r), h, 30)

	// Local retention now deletes the merged segment.
	cfg := r.c.cfg // the rig's, with its broker and instance ids
	cfg.Topics = maps.Clone(cfg.Topics)
	tc := cfg.Topics["orders"]
	tc.Retention.LocalRetentionMs = ptr(0)
	cfg.Topics["orders"] = tc
	c, err := New(cfg, r.store, r.mgr, WithClock(func() time.Time { return r.now }))
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	r.now = r.now.Add(time.Second)
	if n := r.sync(); n != 0 {
		t.Fatalf("copied %d more", n)
	}
	if bases := r.localBases(); slices.Contains(bases, 10) || slices.Contains(bases, 0) {
		t.Fatalf("local segments %v: the merged segment at 10 is still there", bases)
	}
	checkModel(t, "after local retention", readRemote(t, r), h, 30)
}

// writeKeyedActive writes an empty active segment at base and moves the
// cleaner checkpoint there (every rolled segment is cleaned).
func writeKeyedActive(t *testing.T, r *rig, base int64) {
	t.Helper()
	h := &history{updates: make([]update, base)}
	h.activeSegment(t, r.dir())
}

// batchBaseAt returns the base offset of the batch at byte pos of log.
func batchBaseAt(t *testing.T, log []byte, pos int) int64 {
	t.Helper()
	b, err := batch.ParseHeader(log[pos:], int64(pos))
	if err != nil {
		t.Fatal(err)
	}
	return b.BaseOffset
}

// checkTailIndex checks that every entry of a copy's offset index points
// at the start of the batch holding its offset in the copy's .log, and
// that its time index parses relative to the copy's start offset.
func checkTailIndex(t *testing.T, r *rig, m remotelog.SegmentMetadata, log []byte) {
	t.Helper()
	raw, err := r.mgr.FetchIndex(context.Background(), m, remotelog.OffsetIndex)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := index.ParseOffsetIndex(raw, m.StartOffset)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[int64]int64{} // position -> base offset
	for pos := 0; pos < len(log); {
		b, err := batch.ParseHeader(log[pos:], int64(pos))
		if err != nil {
			t.Fatal(err)
		}
		starts[int64(pos)] = b.BaseOffset
		pos += int(b.Size)
	}
	for _, e := range offs {
		if base, ok := starts[int64(e.Position)]; !ok || base > e.Offset {
			t.Fatalf("offset index entry %+v does not point at its batch in the tail copy", e)
		}
	}
	traw, err := r.mgr.FetchIndex(context.Background(), m, remotelog.TimeIndex)
	if err != nil {
		t.Fatal(err)
	}
	times, err := index.ParseTimeIndex(traw, m.StartOffset)
	if err != nil || len(times) == 0 || times[len(times)-1].Offset > m.EndOffset || times[0].Offset < m.StartOffset {
		t.Fatalf("time index %+v (%v)", times, err)
	}
}

// TestCompactedTailCopyStraddleWaits: segment 0 is copied; a merged
// segment at 0 then holds a batch of offsets 8 to 12, across the last
// tiered offset 9 (a batch the copier cannot split). Nothing is copied
// and the partition waits for not_cleaned, saying so; the copy of 0
// stays.
func TestCompactedTailCopyStraddleWaits(t *testing.T) {
	r := tailRig(t, true)
	dir := r.dir()
	ts := r.now.UnixMilli()
	seg0 := map[int64]update{}
	for o := int64(0); o < 10; o++ {
		seg0[o] = update{key: fmt.Sprintf("a%d", o), value: "x"}
	}
	writeRecords(t, dir, 0, ts, seg0)
	writeKeyedActive(t, r, 10)
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d, want segment 0", n)
	}
	first := r.finished()
	// A merged segment 0..19 whose batch at 8 holds offsets 8 to 12.
	removeSegment(dir, 10)
	var log []byte
	appendBatch := func(base int64, n int) {
		var recs []batch.Record
		for i := 0; i < n; i++ {
			recs = append(recs, batch.Record{Timestamp: ts, Key: fmt.Appendf(nil, "m%d", base+int64(i)), Value: []byte("y")})
		}
		b, err := batch.AppendBatch(nil, batch.NewParams(base, 0), recs, nil)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, b...)
	}
	appendBatch(0, 8)
	appendBatch(8, 5)
	appendBatch(13, 7)
	if err := os.WriteFile(filepath.Join(dir, kafkalog.FileName(0, kafkalog.LogSuffix)), log, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, kafkalog.FileName(0, kafkalog.IndexSuffix)), nil, 0o644)
	os.WriteFile(filepath.Join(dir, kafkalog.FileName(0, kafkalog.TimeIndexSuffix)), nil, 0o644)
	writeKeyedActive(t, r, 20)
	for i := 0; i < 2; i++ {
		r.now = r.now.Add(time.Second)
		if n := r.sync(); n != 0 {
			t.Fatalf("copied %d with a batch across the tiered offset", n)
		}
		st := r.status(r.tp)
		if st.State != remotelog.TierWaiting || st.Reason != remotelog.WaitNotCleaned || !strings.Contains(st.Detail, "straddles") ||
			!strings.Contains(st.Detail, "offsets 8 to 12") || !strings.Contains(st.Detail, "last tiered offset 9") {
			t.Fatalf("status %s/%s %q, want not_cleaned naming the straddling batch", st.State, st.Reason, st.Detail)
		}
	}
	if fin := r.finished(); len(fin) != 1 || fin[0].ID != first[0].ID {
		t.Fatalf("finished copies %+v, want segment 0's only", fin)
	}
}

// TestCompactedTailCopyEmptyWaits: segment 0 is copied; the cleaner then
// merges it with segment 10, all of whose records it removed, so the
// merged segment holds no batch after the tiered offset 9. Nothing is
// copied (an empty copy of offsets 10 to 19 would hold nothing to read),
// and the partition waits for not_cleaned, saying so.
func TestCompactedTailCopyEmptyWaits(t *testing.T) {
	r := tailRig(t, true)
	dir := r.dir()
	seg0 := map[int64]update{}
	for o := int64(0); o < 10; o++ {
		seg0[o] = update{key: fmt.Sprintf("a%d", o), value: "x"}
	}
	writeRecords(t, dir, 0, r.now.UnixMilli(), seg0)
	writeKeyedActive(t, r, 10)
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d, want segment 0", n)
	}
	removeSegment(dir, 10)
	writeKeyedActive(t, r, 20) // segment 0 now ends at 19 and holds offsets 0 to 9
	r.now = r.now.Add(time.Second)
	if n := r.sync(); n != 0 {
		t.Fatalf("copied %d with nothing after the tiered offset", n)
	}
	if st := r.status(r.tp); st.Reason != remotelog.WaitNotCleaned || !strings.Contains(st.Detail, "no batch after the last tiered offset") {
		t.Fatalf("status %s/%s %q", st.State, st.Reason, st.Detail)
	}
}

// TestCutTxnIndex: a tail keeps the .txnindex entries of transactions
// aborted at or after its first offset, in a new file named by it, and
// none when no entry remains; the staged link is removed, the local
// file kept.
func TestCutTxnIndex(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, kafkalog.FileName(0, kafkalog.TxnIndexSuffix))
	var raw []byte
	for _, last := range []int64{5, 19, 20, 27} {
		raw = index.AppendAbortedTxn(raw, index.AbortedTxn{ProducerID: last, FirstOffset: last - 3, LastOffset: last, LastStableOffset: last - 3})
	}
	if err := os.WriteFile(local, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from int64
		want []int64
	}{{20, []int64{20, 27}}, {28, nil}} {
		sd := filepath.Join(dir, fmt.Sprint("stage", c.from))
		os.MkdirAll(sd, 0o755)
		st := &staged{dir: sd, txnIdx: filepath.Join(sd, filepath.Base(local))}
		if err := os.Link(local, st.txnIdx); err != nil {
			t.Fatal(err)
		}
		if err := st.cutTxnIndex(c.from); err != nil {
			t.Fatal(err)
		}
		if c.want == nil {
			if st.txnIdx != "" {
				t.Fatalf("from %d: txnindex %s, want none", c.from, st.txnIdx)
			}
			continue
		}
		if filepath.Base(st.txnIdx) != kafkalog.FileName(c.from, kafkalog.TxnIndexSuffix) {
			t.Fatalf("from %d: staged %s", c.from, st.txnIdx)
		}
		b, _ := os.ReadFile(st.txnIdx)
		got, err := index.ParseTxnIndex(b)
		var lasts []int64
		for _, e := range got {
			lasts = append(lasts, e.LastOffset)
		}
		if err != nil || !slices.Equal(lasts, c.want) {
			t.Fatalf("from %d: kept %v (%v), want %v", c.from, lasts, err, c.want)
		}
		if b, err := os.ReadFile(local); err != nil || !bytes.Equal(b, raw) {
			t.Fatalf("local .txnindex changed: %v", err)
		}
	}
}
