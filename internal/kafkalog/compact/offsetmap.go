package compact

import (
	"fmt"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// OffsetMap maps each key of a dirty range to the offset of its latest
// record, as Kafka's SkimpyOffsetMap does for one cleaning (built by
// LogCleaner.buildOffsetMapForSegment). Unlike Kafka's, it holds whole
// keys (no hash collisions) and has no size limit. Build it by calling Add
// with every entry of the dirty range in offset order.
//
// Rules: control batches and batches of aborted transactions do not enter
// the map; records with a null key do not either; records below the start
// offset are skipped; legacy entries (magic 0 and 1) are skipped. The
// latest offset is the last offset of the last v2 batch added that ends at
// or past the start offset, whatever its kind.
type OffsetMap struct {
	start  int64
	keys   map[string]int64
	latest int64
	txns   *txnState
	dec    batch.Decompressor
}

// NewOffsetMap returns an empty map for a dirty range starting at start
// (the first dirty offset). aborted lists the aborted transactions
// (.txnindex entries) that may cover the range, in any order (those
// ending below start are ignored); dec
// decompresses compressed batches (nil is fine when there are none).
func NewOffsetMap(start int64, aborted []index.AbortedTxn, dec batch.Decompressor) *OffsetMap {
	// Only the transactions still running at start matter, as in Kafka's
	// collectAbortedTransactions(start, end): the map never reads the
	// marker of one that ended below start, so it would stay "ongoing"
	// and make the producer's later transactions look aborted.
	var live []index.AbortedTxn
	for _, a := range aborted {
		if a.LastOffset >= start {
			live = append(live, a)
		}
	}
	return &OffsetMap{start: start, keys: map[string]int64{}, latest: -1, txns: newTxnState(live), dec: dec}
}

// Add reads one whole log entry (as batch.Scanner's Raw returns it); raw
// entries must come in offset order. Errors are corruption errors
// (wrapping kafkalog.ErrCorrupt) or the decompressor's, wrapped with the
// entry's base offset.
func (m *OffsetMap) Add(raw []byte) error {
	b, err := batch.ParseHeader(raw, 0)
	if err != nil {
		return err
	}
	if b.Legacy() {
		return nil
	}
	if b.Control {
		recs, err := batch.Records(raw, m.dec)
		if err != nil {
			return fmt.Errorf("control batch at offset %d: %w", b.BaseOffset, err)
		}
		m.txns.onControl(b, recs)
	} else if !m.txns.onData(b) {
		recs, err := batch.Records(raw, m.dec)
		if err != nil {
			return fmt.Errorf("batch at offset %d: %w", b.BaseOffset, err)
		}
		for _, r := range recs {
			if r.Key != nil && r.Offset >= m.start {
				m.keys[string(r.Key)] = r.Offset
			}
		}
	}
	if b.LastOffset >= m.start {
		m.latest = max(m.latest, b.LastOffset)
	}
	return nil
}

// Cover records that the map covers the dirty range up to end
// (exclusive) even where no batch reaches it, as Kafka does at the end of
// each segment it maps (updateLatestOffset(nextSegmentStartOffset - 1)),
// so records in a segment's trailing gap are judged too. Cover(start) on a
// map of an empty dirty range makes its latest offset start - 1: a pass
// with nothing dirty (one run because a delete horizon passed) judges
// every record below start.
func (m *OffsetMap) Cover(end int64) {
	if end >= m.start {
		m.latest = max(m.latest, end-1)
	}
}

// Get returns the latest offset of key and whether the map has it.
func (m *OffsetMap) Get(key []byte) (int64, bool) {
	off, ok := m.keys[string(key)]
	return off, ok
}

// Len returns the number of keys.
func (m *OffsetMap) Len() int { return len(m.keys) }

// Start returns the first dirty offset the map was built from.
func (m *OffsetMap) Start() int64 { return m.start }

// LatestOffset returns the last offset the map covers, -1 when empty. One
// past it is the new first dirty offset once the cleaning is done (Kafka's
// cleaner checkpoints offsetMap.latestOffset + 1).
func (m *OffsetMap) LatestOffset() int64 { return m.latest }
