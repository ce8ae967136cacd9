package compact

import (
	"errors"
	"fmt"
	"math"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// Producer is what the filter needs of an active producer (one whose state
// a broker still keeps) to preserve its state, as Kafka's
// lastRecordsOfActiveProducers does: the batch holding its last data
// offset is kept, empty if nothing else in it stays, so that its last
// sequence number survives.
type Producer struct {
	// LastDataOffset is the last offset of the producer's last data batch,
	// or -1 when its last entry is a transaction marker (then the marker of
	// Epoch is kept, for fencing).
	LastDataOffset int64
	// Epoch is the producer's current epoch.
	Epoch int16
}

// Options are the inputs of one cleaning besides the offset map.
type Options struct {
	// NowMs is the cleaning's time, ms since the epoch.
	NowMs int64
	// DeleteRetentionMs is delete.retention.ms: how long a tombstone or a
	// discardable transaction marker stays after the cleaning that first
	// retained it.
	DeleteRetentionMs int64
	// Aborted lists the aborted transactions (.txnindex entries) that may
	// cover the batches filtered, in any order.
	Aborted []index.AbortedTxn
	// ActiveProducers maps producer id to its state; nil means none.
	ActiveProducers map[int64]Producer
	// UpperBound is the end (exclusive) of the cleaning round, the first
	// uncleanable offset: the batch whose last offset is UpperBound-1 is
	// kept, empty if nothing else in it stays, so the cleaned log keeps
	// its last offset (Kafka 4.0 LogCleaner.cleanInto). 0 disables it.
	UpperBound int64
	// KeepDeletes keeps every tombstone and transaction marker whatever
	// its delete horizon (the horizon is still set where none is): for a
	// cleaning that does not start at the log start, whose earlier part
	// may hold older records of a tombstone's key or the batches a marker
	// ends (remote compaction of a run of copies after the first). Kafka's
	// cleaner always starts at the log start and has no such case.
	KeepDeletes bool
	// Compressor re-compresses rewritten batches with their own codec;
	// Decompressor reads compressed batches. Either may be nil when no
	// compressed batch is met.
	Compressor   batch.Compressor
	Decompressor batch.Decompressor
}

// Action says what Filter.Batch did with one entry.
type Action int

// Actions.
const (
	// Dropped: nothing of the entry is kept.
	Dropped Action = iota
	// KeptAsIs: the entry is kept byte for byte.
	KeptAsIs
	// Rewritten: the entry is kept with fewer records or a new delete
	// horizon.
	Rewritten
	// KeptEmpty: only the header is kept, with no records, to preserve an
	// active producer's last sequence or epoch.
	KeptEmpty
)

// String returns the action's name.
func (a Action) String() string {
	return [...]string{"dropped", "kept", "rewritten", "kept-empty"}[a]
}

// Result describes one filtered entry.
type Result struct {
	Action      Action
	RecordsRead int // records in the entry
	RecordsKept int
	// MaxTimestamp is the kept entry's max timestamp (ms), for the time
	// index; meaningful when Action is not Dropped.
	MaxTimestamp int64
}

// Filter rewrites the entries of a cleaning, one at a time in offset
// order, by Kafka's rules (see the package doc). One Filter serves one
// cleaning pass: it follows transactions across entries.
type Filter struct {
	m       *OffsetMap
	o       Options
	txns    *txnState
	started bool // an entry was read
}

// NewFilter returns a Filter applying m, built over the dirty range of the
// same cleaning, with the options o.
func NewFilter(m *OffsetMap, o Options) *Filter {
	return &Filter{m: m, o: o, txns: newTxnState(o.Aborted)}
}

// ErrDecode marks an entry the filter could not decode.
var ErrDecode = errors.New("compact: cannot decode entry")

// Batch filters one whole log entry raw and appends what is kept to dst,
// returning the extended slice. A kept batch keeps its offsets (base
// offset and last offset delta), partition leader epoch, producer id and
// epoch, base sequence, attributes and codec; its CRC is recomputed when
// it is rewritten. Legacy entries (magic 0 and 1) are kept as they are.
// Errors wrap ErrDecode with the decoder's error, or are the compressor's.
func (f *Filter) Batch(dst, raw []byte) ([]byte, Result, error) {
	b, err := batch.ParseHeader(raw, 0)
	if err != nil {
		return dst, Result{}, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	if b.Legacy() {
		return append(dst, raw...), Result{Action: KeptAsIs, RecordsRead: -1, RecordsKept: -1, MaxTimestamp: b.MaxTimestamp}, nil
	}
	recs, err := batch.Records(raw, f.o.Decompressor)
	if err != nil {
		return dst, Result{}, fmt.Errorf("%w: batch at offset %d: %w", ErrDecode, b.BaseOffset, err)
	}
	res := Result{RecordsRead: len(recs)}
	if !f.started {
		// Input may start past the log start (remote compaction of a
		// later range): transactions that ended before it are over.
		f.started = true
		f.txns.dropEndedBefore(b.BaseOffset)
	}

	// LogCleaner's checkBatchRetention.
	var canDiscard, discardRecords bool
	if b.Control {
		canDiscard = f.txns.onControl(b, recs)
		h, ok := horizon(b)
		discardRecords = canDiscard && ok && h <= f.o.NowMs && !f.o.KeepDeletes
	} else {
		canDiscard = f.txns.onData(b)
		discardRecords = canDiscard
	}
	retainEmpty := (b.ProducerID >= 0 && f.lastOfProducer(b)) ||
		(f.o.UpperBound > 0 && b.LastOffset+1 == f.o.UpperBound)
	if discardRecords && !retainEmpty {
		return dst, res, nil
	}

	// LogCleaner's shouldRetainRecord, through MemoryRecords.filterTo.
	kept := recs[:0:0]
	tombstones := false
	if !discardRecords {
		for _, r := range recs {
			if b.Control || f.retainRecord(b, r) {
				kept = append(kept, r)
				tombstones = tombstones || r.Value == nil
			}
		}
	}
	res.RecordsKept = len(kept)
	if len(kept) == 0 {
		if !retainEmpty {
			return dst, res, nil
		}
		res.Action, res.MaxTimestamp = KeptEmpty, b.MaxTimestamp
		return appendEmpty(dst, b), res, nil
	}
	_, hasHorizon := horizon(b)
	setHorizon := !hasHorizon && (tombstones || (canDiscard && b.Control))
	if len(kept) == len(recs) && !setHorizon {
		res.Action, res.MaxTimestamp = KeptAsIs, b.MaxTimestamp
		return append(dst, raw...), res, nil
	}
	h := batch.NoTimestamp
	if setHorizon {
		h = addSaturated(f.o.NowMs, f.o.DeleteRetentionMs)
	} else if hasHorizon {
		h = b.FirstTimestamp
	}
	out, maxTS, err := appendRetained(dst, b, kept, h, f.o.Compressor)
	if err != nil {
		return dst, res, err
	}
	res.Action, res.MaxTimestamp = Rewritten, maxTS
	return out, res, nil
}

// SetUpperBound changes Options.UpperBound for the entries that follow, so
// that a caller writing several output segments in one pass can keep the
// last batch of each (seglog does, so that a cleaned segment always ends
// at its original next offset).
func (f *Filter) SetUpperBound(end int64) { f.o.UpperBound = end }

// NowMs returns the cleaning's clock (Options.NowMs, ms): a delete horizon
// at or before it has passed.
func (f *Filter) NowMs() int64 { return f.o.NowMs }

// retainRecord is LogCleaner.shouldRetainRecord for a v2 data record.
func (f *Filter) retainRecord(b batch.Batch, r batch.Record) bool {
	if r.Offset > f.m.LatestOffset() {
		return true // past the dirty range: not for this cleaning to judge
	}
	if r.Key == nil {
		return false // a compacted topic has no null keys; Kafka drops them
	}
	if latest, ok := f.m.Get(r.Key); ok && r.Offset < latest {
		return false
	}
	if r.Value != nil {
		return true
	}
	h, ok := horizon(b)
	return !ok || f.o.NowMs < h || f.o.KeepDeletes
}

// lastOfProducer reports whether b holds an active producer's last data
// offset, or is its latest epoch's marker when its last entry is a marker.
func (f *Filter) lastOfProducer(b batch.Batch) bool {
	p, ok := f.o.ActiveProducers[b.ProducerID]
	if !ok {
		return false
	}
	if p.LastDataOffset >= 0 {
		return b.LastOffset == p.LastDataOffset
	}
	return b.Control && b.ProducerEpoch == p.Epoch
}

// AbortedKept returns, after the last Batch call, the aborted transactions
// whose batches were read in this pass and whose ABORT marker was read:
// the .txnindex entries the cleaned segments keep (Kafka's cleanedIndex).
func (f *Filter) AbortedKept() []index.AbortedTxn {
	return append([]index.AbortedTxn(nil), f.txns.kept...)
}

// addSaturated returns now + d (ms), capped at math.MaxInt64 instead of
// wrapping: delete.retention.ms may be Long.MAX_VALUE ("keep tombstones
// for good"), and a wrapped sum would be a horizon in the past that the
// next cleaning passes. Kafka's MemoryRecords.filterTo adds without the
// cap.
func addSaturated(now, d int64) int64 {
	if d > 0 && now > math.MaxInt64-d {
		return math.MaxInt64
	}
	return now + d
}

// horizon returns a v2 batch's delete horizon (KIP-534: attributes bit 6
// set, the base timestamp holds it).
func horizon(b batch.Batch) (int64, bool) {
	if b.Magic != 2 || b.Attributes&DeleteHorizonBit == 0 {
		return 0, false
	}
	return b.FirstTimestamp, true
}

// DeleteHorizon returns the delete horizon (ms) of the v2 batch whose
// header is b, and whether it has one (KIP-534).
func DeleteHorizon(b batch.Batch) (int64, bool) { return horizon(b) }
