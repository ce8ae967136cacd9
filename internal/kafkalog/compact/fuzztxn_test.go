package compact

import (
	"fmt"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// txnLog turns fuzz bytes into one batch per byte: plain records,
// transactional records of producers 1 and 2, and their COMMIT or ABORT
// markers; open transactions are aborted at the end. It returns the
// entries, the .txnindex entries, the aborted offsets and the latest
// non-aborted record per key.
func txnLog(t *testing.T, data []byte) (entries [][]byte, aborted []index.AbortedTxn, abortedOffs map[int64]bool, latest map[string]modelRec) {
	abortedOffs, latest = map[int64]bool{}, map[string]modelRec{}
	open := map[int64][]int64{} // producer -> offsets of its open transaction
	seq := map[int64]int32{}
	next := int64(0)
	end := func(pid int64, commit bool) {
		if open[pid] == nil {
			return
		}
		entries = append(entries, marker(t, next, pid, 0, commit))
		if !commit {
			aborted = append(aborted, index.AbortedTxn{ProducerID: pid, FirstOffset: open[pid][0], LastOffset: next, LastStableOffset: next + 1})
			for _, o := range open[pid] {
				abortedOffs[o] = true
			}
		}
		delete(open, pid)
		next++
	}
	var recs []modelRec
	for i, op := range data {
		if i >= 300 {
			break
		}
		key := fmt.Sprintf("k%d", (op>>3)%5)
		value := []byte(fmt.Sprintf("v%d", next))
		if op&0x80 != 0 {
			value = nil
		}
		r := batch.Record{Key: []byte(key), Value: value, Timestamp: int64(100 + i)}
		switch op % 8 {
		case 0, 1, 2, 3:
			entries = append(entries, mk(t, next, nil, r))
		case 4, 5:
			pid := int64(op%8 - 3)
			entries = append(entries, mk(t, next, txn(pid, 0, seq[pid]), r))
			seq[pid]++
			open[pid] = append(open[pid], next)
		case 6, 7:
			end(int64(op%8-5), op&0x40 != 0)
			continue
		}
		recs = append(recs, modelRec{off: next, key: r.Key, value: r.Value})
		next++
	}
	end(1, false)
	end(2, false)
	for _, r := range recs {
		if !abortedOffs[r.off] {
			latest[string(r.key)] = r
		}
	}
	return entries, aborted, abortedOffs, latest
}

// FuzzCompactTransactions checks, over three passes, that records of
// aborted transactions never survive and never shadow an older value, that
// the latest committed or plain record of every key stays (tombstones
// until their horizon), that no key appears twice, and that the markers
// go in the end.
func FuzzCompactTransactions(f *testing.F) {
	f.Add([]byte{4, 12, 6, 5, 0x45, 7, 0x47, 8, 0, 4, 0x46})
	f.Add([]byte{4, 5, 0x44, 6, 7, 1, 2, 0x8c, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, aborted, abortedOffs, latest := txnLog(t, data)
		if len(entries) == 0 {
			return
		}
		check := func(out [][]byte, tombsGone bool) {
			seen := map[string]int64{}
			for _, r := range records(t, out) {
				if abortedOffs[r.off] {
					t.Fatalf("aborted record at %d kept", r.off)
				}
				if _, dup := seen[r.key]; dup {
					t.Fatalf("key %s kept at %d and %d", r.key, seen[r.key], r.off)
				}
				seen[r.key] = r.off
				if latest[r.key].off != r.off {
					t.Fatalf("key %s kept at %d, latest is %d", r.key, r.off, latest[r.key].off)
				}
			}
			for k, m := range latest {
				if _, ok := seen[k]; !ok && (m.value != nil || !tombsGone) {
					t.Fatalf("latest record of %s (offset %d) lost", k, m.off)
				}
			}
		}
		lastOff := header(t, entries[len(entries)-1]).LastOffset
		out, f1 := pass(t, entries, 0, Options{NowMs: 1000, DeleteRetentionMs: 10, Aborted: aborted})
		check(out, false)
		next := lastOff + 1
		addDirty := func(out [][]byte, key string) [][]byte {
			out, _ = dirtyAt(t, out, next, key)
			latest[key] = modelRec{off: next, key: []byte(key), value: []byte("1")}
			next++
			return out
		}
		out = addDirty(out, "d1")
		out, f2 := pass(t, out, next-1, Options{NowMs: 2000, DeleteRetentionMs: 10, Aborted: f1.AbortedKept()})
		check(out, true)
		out = addDirty(out, "d2")
		out, _ = pass(t, out, next-1, Options{NowMs: 3000, DeleteRetentionMs: 10, Aborted: f2.AbortedKept()})
		check(out, true)
		// Every marker's transaction has lost its batches or kept only
		// committed ones; an abort marker is gone by the third pass.
		for _, e := range out {
			if b := header(t, e); b.Control {
				recs, _ := batch.Records(e, nil)
				if kind, _ := ControlType(recs[0].Key); kind == controlAbort {
					t.Fatalf("abort marker at %d survived three passes", b.BaseOffset)
				}
			}
		}
	})
}
