package index

// Builder decides where a segment's sparse index entries go, by the rule a
// broker follows both when appending and when recovering a segment
// (LogSegment.append / LogSegment.recover): before a batch is added, if more
// than IntervalBytes were appended since the last entry, the offset index
// maps the batch's last offset to its position and the time index records
// the largest timestamp so far, when it grew. Seal adds the last time entry
// a broker writes when the segment rolls.
type Builder struct {
	IntervalBytes int64
	Offsets       []OffsetEntry
	Times         []TimeEntry
	// MaxTimestamp is the largest batch max timestamp so far (-1 if none),
	// OffsetOfMaxTimestamp the last offset of the batch that had it.
	MaxTimestamp         int64
	OffsetOfMaxTimestamp int64
	bytesSince           int64
}

// NewBuilder returns a builder for a segment at baseOffset.
func NewBuilder(baseOffset, intervalBytes int64) *Builder {
	return &Builder{IntervalBytes: intervalBytes, MaxTimestamp: -1, OffsetOfMaxTimestamp: baseOffset}
}

// Add records one batch (last offset, max timestamp, byte position, size)
// and returns the entries it added, if any, for the caller to persist.
func (b *Builder) Add(lastOffset, maxTimestamp, position int64, size int32) (off *OffsetEntry, tim *TimeEntry) {
	if maxTimestamp > b.MaxTimestamp {
		b.MaxTimestamp, b.OffsetOfMaxTimestamp = maxTimestamp, lastOffset
	}
	if b.bytesSince > b.IntervalBytes {
		b.Offsets = append(b.Offsets, OffsetEntry{Offset: lastOffset, Position: int32(position)})
		off = &b.Offsets[len(b.Offsets)-1]
		tim = b.Seal()
		b.bytesSince = 0
	}
	b.bytesSince += int64(size)
	return off, tim
}

// Seal adds a time entry for the largest timestamp so far when it is newer
// than the last entry (TimeIndex.maybeAppend), and returns it.
func (b *Builder) Seal() *TimeEntry {
	last := int64(-1)
	if n := len(b.Times); n > 0 {
		last = b.Times[n-1].Timestamp
	}
	if b.MaxTimestamp <= last {
		return nil
	}
	b.Times = append(b.Times, TimeEntry{Timestamp: b.MaxTimestamp, Offset: b.OffsetOfMaxTimestamp})
	return &b.Times[len(b.Times)-1]
}

// EncodeOffsets returns the file bytes of offset index entries.
func EncodeOffsets(base int64, entries []OffsetEntry) ([]byte, error) {
	buf := make([]byte, 0, len(entries)*OffsetEntrySize)
	var err error
	for _, e := range entries {
		if buf, err = AppendOffsetEntry(buf, base, e); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// EncodeTimes returns the file bytes of time index entries.
func EncodeTimes(base int64, entries []TimeEntry) ([]byte, error) {
	buf := make([]byte, 0, len(entries)*TimeEntrySize)
	var err error
	for _, e := range entries {
		if buf, err = AppendTimeEntry(buf, base, e); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// Encode returns the .index and .timeindex file contents of the entries
// built so far, relative to the segment's base offset (EncodeOffsets,
// EncodeTimes). Errors: an entry whose offset does not fit the 4-byte
// relative offset.
func (b *Builder) Encode(base int64) (offsets, times []byte, err error) {
	if offsets, err = EncodeOffsets(base, b.Offsets); err != nil {
		return nil, nil, err
	}
	if times, err = EncodeTimes(base, b.Times); err != nil {
		return nil, nil, err
	}
	return offsets, times, nil
}
