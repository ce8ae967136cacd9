package batch

import (
	"github.com/tierd/tierd/internal/kafkalog"
)

// Checks of the fields no checksum covers.
//
// A v2 batch's CRC-32C covers its bytes from the attributes on (byte 21),
// so its base offset, batch length, partition leader epoch and magic lie
// outside it; a legacy message's CRC-32 covers the magic on, so its offset
// and length lie outside. A bad byte there leaves an entry that passes its
// CRC while naming offsets no broker wrote. The rules below are the
// invariants Kafka keeps on disk, each with where it comes from (Apache
// Kafka 3.9 sources):
//
//   - Offsets increase from entry to entry: a v2 batch's base offset is
//     above the previous entry's last offset (a legacy entry's offset
//     above it). The leader assigns offsets from the log end offset
//     (LogValidator), and an append of given offsets is refused when its
//     last offsets do not increase (UnifiedLog.analyzeAndValidateRecords,
//     OffsetsOutOfOrderException) or when it starts below the log end
//     offset (UnifiedLog.append, UnexpectedAppendOffsetException).
//   - Every offset lies in [segment base offset, next segment's base
//     offset): a segment is rolled at the offset of the append that opens
//     it, never above it (UnifiedLog.maybeRoll, LocalLog.roll), and
//     LogSegment.recover checks each batch's last offset against the base
//     (ensureOffsetInRange). A v2 batch's base offset is at most its last
//     offset because lastOffsetDelta is not negative (checked when the
//     header is parsed).
//   - The magic is 0, 1 or 2 (checked when the prefix is parsed, as
//     FileLogInputStream and the record batch classes do).
//   - A v2 batch's partition leader epoch is -1 (none,
//     RecordBatch.NO_PARTITION_LEADER_EPOCH) or a leader epoch, which is
//     never negative. No Kafka reader checks this, but no Kafka writer
//     stamps anything else (LogValidator sets the leader's epoch). Epochs
//     are not required to increase: LeaderEpochFileCache tolerates a lower
//     one (it truncates its entries), so neither does this check.
//   - A v2 batch holds at most lastOffsetDelta+1 records. A producer's
//     batch holds exactly that many (LogValidator.validateBatch, "Inconsistent
//     batch offset range"), but compaction keeps a batch's lastOffsetDelta
//     while it removes records (MemoryRecords.buildRetainedRecordsInto
//     overrides the last offset; writeEmptyHeader keeps a batch with 0
//     records), so count-1 == lastOffsetDelta is not a rule on disk.
//   - The records of an uncompressed v2 batch parse to exactly count
//     records that end at the batch end, each ending where its length says
//     (DefaultRecordBatch.RecordIterator: "Incorrect declared batch size";
//     DefaultRecord.readFrom: "Invalid record size"), with offset deltas that
//     strictly increase and never pass lastOffsetDelta. The last part is
//     what Kafka's writers do (MemoryRecordsBuilder.appendWithOffset refuses
//     offsets that do not increase, and the log cleaner rebuilds batches
//     through it), not a check the broker makes: LogValidator does not read
//     the offset deltas of an uncompressed producer batch, so a batch that
//     breaks it came from a writer that is not Kafka's own client or broker.
//     Compressed batches are not opened here (that needs a decompressor and
//     memory); their CRC covers the records.
//
// Legacy entries (magic 0 and 1) get the offset rules only, on the offset
// of the message or wrapper; a wrapper's inner offsets lie below its own
// and are not read here.

// Checker applies the rules above, in file order, to the entries of one
// segment. Use one Checker per segment:
//
//	c := batch.NewChecker(base, end)
//	for s.Next() { if err := c.Check(s.Batch()); err != nil { ... } }
type Checker struct {
	base, end int64
	prevLast  int64 // the last offset of the previous entry
	started   bool  // whether there was a previous entry
}

// NewChecker returns a Checker for a segment whose base offset is base and
// whose last possible offset is end (the next segment's base offset - 1),
// or -1 when nothing bounds it (an active segment, or a file read alone).
func NewChecker(base, end int64) *Checker {
	return &Checker{base: base, end: end}
}

// Check checks the header of b, the next entry of the segment, and returns
// nil or a *kafkalog.CorruptionError naming the position of the field that
// breaks a rule (see the rules above).
func (c *Checker) Check(b Batch) error {
	first := b.BaseOffset
	if b.Legacy() {
		first = b.LastOffset // a wrapper's first offset is not in its header
	}
	switch {
	case c.started && first <= c.prevLast:
		return kafkalog.Corruptf(b.Position, "%s at offset %d is not after the previous entry's last offset %d", entryKind(b), first, c.prevLast)
	case first < c.base:
		return kafkalog.Corruptf(b.Position, "%s at offset %d is below the segment's base offset %d", entryKind(b), first, c.base)
	case c.end >= 0 && b.LastOffset > c.end:
		return kafkalog.Corruptf(b.Position, "%s ends at offset %d, past the segment's last offset %d (the next segment starts at %d)",
			entryKind(b), b.LastOffset, c.end, c.end+1)
	case b.Magic == 2 && b.PartitionLeaderEpoch < -1:
		return kafkalog.Corruptf(b.Position+12, "batch at offset %d has partition leader epoch %d", first, b.PartitionLeaderEpoch)
	case b.Magic == 2 && int64(b.Count)-1 > b.LastOffset-b.BaseOffset:
		return kafkalog.Corruptf(b.Position+57, "batch at offset %d holds %d records, more than its %d offsets", first, b.Count, b.LastOffset-b.BaseOffset+1)
	}
	c.prevLast, c.started = b.LastOffset, true
	return nil
}

func entryKind(b Batch) string {
	if b.Legacy() {
		return "message"
	}
	return "batch"
}

// CheckRecords checks the records of an uncompressed v2 batch against its
// header; raw is the whole entry (len(raw) == Size). They must parse to
// exactly Count records that end at the end of the batch, each ending
// where its length says, with offset deltas that strictly increase from 0
// up and never pass the last offset delta (see the rules above). Other
// entries give nil: compressed records are not opened, and a legacy
// message is its own record. Errors are *kafkalog.CorruptionError with
// positions in the file (b.Position + the position in raw).
func (b *Batch) CheckRecords(raw []byte) error {
	if b.Magic != 2 || b.Codec != CodecNone {
		return nil
	}
	if len(raw) != int(b.Size) {
		return kafkalog.Corruptf(b.Position, "entry size %d but %d bytes given", b.Size, len(raw))
	}
	maxDelta := b.LastOffset - b.BaseOffset
	at := func(p int) int64 { return b.Position + HeaderSize + int64(p) }
	r := reader{buf: raw[HeaderSize:]}
	prev := int64(-1)
	for i := int32(0); i < b.Count; i++ {
		start := r.pos
		if start == len(r.buf) {
			return kafkalog.Corruptf(b.Position+57, "the batch at offset %d counts %d records but ends after %d", b.BaseOffset, b.Count, i)
		}
		length := r.varint()
		if r.bad || length < 0 || int(length) > len(r.buf)-r.pos {
			return kafkalog.Corruptf(at(start), "record %d of the %d the batch at offset %d counts: length %d runs past the batch end", i, b.Count, b.BaseOffset, length)
		}
		end := r.pos + int(length)
		delta := int64(r.skipRecord(end))
		if r.bad || r.pos != end {
			return kafkalog.Corruptf(at(start), "record %d of the batch at offset %d: malformed", i, b.BaseOffset)
		}
		if delta <= prev || delta > maxDelta {
			return kafkalog.Corruptf(at(start), "record %d of the batch at offset %d: offset delta %d, want above %d and at most the last offset delta %d",
				i, b.BaseOffset, delta, prev, maxDelta)
		}
		prev = delta
	}
	if r.pos != len(r.buf) {
		return kafkalog.Corruptf(at(r.pos), "%d bytes after the %d records the batch at offset %d counts", len(r.buf)-r.pos, b.Count, b.BaseOffset)
	}
	return nil
}
