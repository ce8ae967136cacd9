package batch

import "encoding/binary"

// reader decodes Kafka varint-framed fields with a sticky error: once a
// read fails, every later read returns zero and bad stays true, so a decode
// is a straight line of reads followed by one check.
type reader struct {
	buf []byte
	pos int
	bad bool
}

func (r *reader) varlong() int64 {
	if r.bad {
		return 0
	}
	v, n := binary.Varint(r.buf[r.pos:])
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.pos += n
	return v
}

// varint reads a zigzag varint that must fit in int32 (at most 5 bytes).
func (r *reader) varint() int32 {
	start := r.pos
	v := r.varlong()
	if r.pos-start > 5 || v < -1<<31 || v > 1<<31-1 {
		r.bad = true
		return 0
	}
	return int32(v)
}

func (r *reader) int8() int8 {
	if r.bad || r.pos >= len(r.buf) {
		r.bad = true
		return 0
	}
	r.pos++
	return int8(r.buf[r.pos-1])
}

// bytes reads a varint length and that many bytes; -1 gives nil.
func (r *reader) bytes(limit int) []byte {
	n := r.varint()
	if r.bad {
		return nil
	}
	if n == -1 {
		return nil
	}
	if n < -1 || int(n) > limit-r.pos {
		r.bad = true
		return nil
	}
	v := r.buf[r.pos : r.pos+int(n) : r.pos+int(n)]
	r.pos += int(n)
	return v
}

// record decodes one v2 record body (after its length) ending at end.
func (r *reader) record(b Batch, end int) Record {
	_ = r.int8() // record attributes: unused by Kafka
	tsDelta := r.varlong()
	offDelta := r.varint()
	key := r.bytes(end)
	value := r.bytes(end)
	nh := r.varint()
	if r.bad || nh < 0 || int(nh) > end-r.pos {
		r.bad = true
		return Record{}
	}
	var hs []RecordHeader
	if nh > 0 {
		hs = make([]RecordHeader, 0, min(int(nh), 16)) // grows as headers parse
	}
	for j := int32(0); j < nh && !r.bad; j++ {
		k := r.bytes(end)
		if k == nil {
			r.bad = true // header keys are non-null strings
			break
		}
		hs = append(hs, RecordHeader{Key: string(k), Value: r.bytes(end)})
	}
	ts := b.FirstTimestamp + tsDelta
	if b.TimestampType == LogAppendTime {
		ts = b.MaxTimestamp
	}
	return Record{Offset: b.BaseOffset + int64(offDelta), Timestamp: ts, Key: key, Value: value, Headers: hs}
}

// skipRecord walks one v2 record body (after its length) ending at end as
// record does, keeping nothing, and returns its offset delta.
func (r *reader) skipRecord(end int) int32 {
	_ = r.int8()    // attributes
	_ = r.varlong() // timestamp delta
	offDelta := r.varint()
	_ = r.bytes(end) // key
	_ = r.bytes(end) // value
	nh := r.varint()
	if r.bad || nh < 0 || int(nh) > end-r.pos {
		r.bad = true
		return 0
	}
	for j := int32(0); j < nh && !r.bad; j++ {
		if r.bytes(end) == nil {
			r.bad = true // header keys are non-null strings
		}
		_ = r.bytes(end)
	}
	return offDelta
}

func appendVarint(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

// varintLen is the encoded size of v as a zigzag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
