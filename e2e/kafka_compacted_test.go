package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// compactedLog is what writeCompactedLog wrote.
type compactedLog struct {
	stored  []batch.Record    // every record in the files, by offset (as batch.Records decodes them)
	latest  map[string][]byte // key -> latest value over the whole history; tombstoned keys absent
	updates int
	keys    int
	active  int64 // the active segment's base offset
	end     int64 // the end offset (high watermark)
}

// Layout of the compacted partition: 3000 updates of 150 keys, batches of
// 10 offsets, segments of 500 offsets; offsets below 2500 cleaned.
const (
	compUpdates  = 3000
	compKeys     = 150
	compBatch    = 10
	compSegment  = 500
	compDirtyOff = 2500
)

// writeCompactedLog writes, into dir, a partition the way Kafka's log
// cleaner leaves a compacted topic: a history of updates (keys updated
// many times, about one in seven a tombstone) whose older part (below
// offset 2500) is cleaned, keeping per key only its latest record and
// dropping the tombstones of the first segment (their delete horizon
// passed); a batch keeps its base offset and last offset delta, so offsets
// go missing inside batches, and a batch left empty goes, so whole ranges
// go missing. Offsets 1480-1499 and 2480-2499 are all cleaned away, so two
// segments end in a gap, one of them the last to be tiered. The segment
// from 2500 is the active one.
func writeCompactedLog(t *testing.T, dir string) *compactedLog {
	t.Helper()
	rng := rand.New(rand.NewPCG(10, 405))
	type update struct {
		key   string
		value []byte
	}
	hist := make([]update, compUpdates)
	lastOf := map[string]int{}
	for off := range hist {
		k := rng.IntN(compKeys)
		switch {
		case off >= 1000 && off < compDirtyOff && off%compSegment >= compSegment-20: // updated again right after
			k = off % 20
		case off >= 1500 && off < compDirtyOff+20 && off%compSegment < 20:
			k = off % 20
		}
		u := update{key: fmt.Sprintf("key-%03d", k)}
		if rng.IntN(7) != 0 {
			u.value = append([]byte(fmt.Sprintf("%s = value written at offset %d|", u.key, off)), bytes.Repeat([]byte{'v'}, rng.IntN(300))...)
		}
		hist[off], lastOf[u.key] = u, off
	}
	cl := &compactedLog{latest: map[string][]byte{}, updates: compUpdates, keys: len(lastOf), active: compDirtyOff, end: compUpdates}
	for _, u := range hist {
		if u.value == nil {
			delete(cl.latest, u.key)
		} else {
			cl.latest[u.key] = u.value
		}
	}
	kept := func(off int) bool {
		u := hist[off]
		switch {
		case off >= compDirtyOff:
			return true
		case lastOf[u.key] != off:
			return false
		}
		return u.value != nil || off >= compSegment
	}
	base := int64(1_700_000_000_000)
	segs := map[int][]byte{}
	for first := 0; first < compUpdates; first += compBatch {
		var offs []int
		for off := first; off < first+compBatch; off++ {
			if kept(off) {
				offs = append(offs, off)
			}
		}
		if len(offs) == 0 {
			continue
		}
		recs := make([]batch.Record, len(offs))
		for i, off := range offs {
			recs[i] = batch.Record{Offset: int64(off), Timestamp: base + int64(off), Key: []byte(hist[off].key), Value: hist[off].value}
		}
		seg := first / compSegment * compSegment
		raw := compactedBatch(int64(first), compBatch-1, recs)
		segs[seg] = append(segs[seg], raw...)
		dec, err := batch.Records(raw, codec.Kafka)
		if err != nil {
			t.Fatalf("batch at %d: %v", first, err)
		}
		cl.stored = append(cl.stored, dec...)
	}
	for seg := 0; seg < compUpdates; seg += compSegment {
		writeFile(t, filepath.Join(dir, kafkalog.FileName(int64(seg), kafkalog.LogSuffix)), segs[seg])
	}
	if err := os.WriteFile(filepath.Join(dir, "leader-epoch-checkpoint"), []byte("0\n1\n0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cl
}

// compactedBatch encodes an uncompressed v2 batch at base whose records
// sit at their own offsets (Record.Offset; gaps allowed, as the log
// cleaner leaves them) and whose last offset delta is lastDelta: the
// layout of Kafka's DefaultRecordBatch, CRC-32C over attributes..end.
func compactedBatch(base int64, lastDelta int32, recs []batch.Record) []byte {
	first, maxTS := recs[0].Timestamp, recs[0].Timestamp
	var body []byte
	for _, r := range recs {
		maxTS = max(maxTS, r.Timestamp)
		var rec []byte
		rec = append(rec, 0) // attributes
		rec = binary.AppendVarint(rec, r.Timestamp-first)
		rec = binary.AppendVarint(rec, r.Offset-base)
		for _, b := range [][]byte{r.Key, r.Value} {
			if b == nil {
				rec = binary.AppendVarint(rec, -1)
			} else {
				rec = append(binary.AppendVarint(rec, int64(len(b))), b...)
			}
		}
		rec = binary.AppendVarint(rec, 0) // no headers
		body = append(binary.AppendVarint(body, int64(len(rec))), rec...)
	}
	b := binary.BigEndian.AppendUint64(nil, uint64(base))
	b = binary.BigEndian.AppendUint32(b, 0) // length, set below
	b = binary.BigEndian.AppendUint32(b, 0) // partition leader epoch
	b = append(b, 2)                        // magic
	b = binary.BigEndian.AppendUint32(b, 0) // CRC, set below
	b = binary.BigEndian.AppendUint16(b, 0) // attributes: no codec, CreateTime
	b = binary.BigEndian.AppendUint32(b, uint32(lastDelta))
	b = binary.BigEndian.AppendUint64(b, uint64(first))
	b = binary.BigEndian.AppendUint64(b, uint64(maxTS))
	b = binary.BigEndian.AppendUint64(b, ^uint64(0)) // producer id -1
	b = binary.BigEndian.AppendUint16(b, 0xffff)     // producer epoch -1
	b = binary.BigEndian.AppendUint32(b, 0xffffffff) // base sequence -1
	b = binary.BigEndian.AppendUint32(b, uint32(len(recs)))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// listEnd asks for a partition's end offset (ListOffsets LATEST), as a
// scan consumer does before it reads up to it.
func listEnd(t *testing.T, ctx context.Context, cl *kgo.Client, tp tpKey) int64 {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, tp.Topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(tp.Topic, tp.Partition)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s: %+v", tp, o)
	}
	return o.Offset
}
