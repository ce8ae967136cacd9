package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/tierd/tierd/internal/kafkalog"
)

// Entry sizes, in bytes.
const (
	OffsetEntrySize = 8
	TimeEntrySize   = 12
	TxnEntrySize    = 34
)

// OffsetEntry is one offset index entry: the batch at byte Position of the
// log ends at (absolute) Offset.
type OffsetEntry struct {
	Offset   int64
	Position int32
}

// TimeEntry is one time index entry: Timestamp (ms) is the largest
// timestamp up to (absolute) Offset.
type TimeEntry struct {
	Timestamp int64
	Offset    int64
}

// ParseOffsetIndex decodes an offset index file's bytes. baseOffset is the
// segment's base offset. It stops at the real end (see the package doc) and
// returns the entries before it. A negative field in entry 0 is corrupt.
// The entries before the problem are returned together with a
// *kafkalog.CorruptionError when the length is not a multiple of 8, when
// bytes after the real end are not all zero (stale or damaged entries), or
// when an offset would overflow int64.
func ParseOffsetIndex(buf []byte, baseOffset int64) ([]OffsetEntry, error) {
	n := len(buf) / OffsetEntrySize
	var entries []OffsetEntry
	var prevRel, prevPos int32
	if baseOffset > math.MaxInt64-math.MaxInt32 {
		return nil, kafkalog.Corruptf(0, "base offset %d too large for relative offsets", baseOffset)
	}
	for i := 0; i < n; i++ {
		e := buf[i*OffsetEntrySize:]
		rel := int32(binary.BigEndian.Uint32(e))
		pos := int32(binary.BigEndian.Uint32(e[4:]))
		if i == 0 {
			if rel == 0 && pos == 0 {
				break // empty, preallocated
			}
			if rel < 0 || pos < 0 {
				return nil, kafkalog.Corruptf(0, "offset index entry 0 has relative offset %d, position %d", rel, pos)
			}
		} else if rel <= prevRel || pos <= prevPos {
			break // zero padding or garbage past the real end
		}
		entries = append(entries, OffsetEntry{Offset: baseOffset + int64(rel), Position: pos})
		prevRel, prevPos = rel, pos
	}
	if err := zeroAfter(buf, len(entries)*OffsetEntrySize, n*OffsetEntrySize); err != nil {
		return entries, err
	}
	if rem := len(buf) % OffsetEntrySize; rem != 0 {
		return entries, kafkalog.Corruptf(int64(n*OffsetEntrySize), "truncated offset index entry: %d of %d bytes", rem, OffsetEntrySize)
	}
	return entries, nil
}

// ParseTimeIndex decodes a time index file's bytes, as ParseOffsetIndex
// does: entries up to the real end, and a corruption error for a partial
// trailing entry, non-zero bytes after the real end, or a negative relative
// offset in entry 0. A first entry of zero bytes is (timestamp 0, base
// offset), as the broker writes for records with timestamp 0, when an
// entry follows it, and padding otherwise.
func ParseTimeIndex(buf []byte, baseOffset int64) ([]TimeEntry, error) {
	n := len(buf) / TimeEntrySize
	var entries []TimeEntry
	var prevTS int64
	var prevRel int32
	if baseOffset > math.MaxInt64-math.MaxInt32 {
		return nil, kafkalog.Corruptf(0, "base offset %d too large for relative offsets", baseOffset)
	}
	for i := 0; i < n; i++ {
		e := buf[i*TimeEntrySize:]
		ts := int64(binary.BigEndian.Uint64(e))
		rel := int32(binary.BigEndian.Uint32(e[8:]))
		if i == 0 {
			// (0, base) is padding, or a real first entry (records with
			// timestamp 0 at the base offset: Kafka's TimeIndex appends
			// any timestamp above -1) when an entry follows it.
			if ts == 0 && rel == 0 && (n == 1 || !realAfterZero(buf[TimeEntrySize:])) {
				break
			}
			if rel < 0 {
				return nil, kafkalog.Corruptf(8, "time index entry 0 has relative offset %d", rel)
			}
		} else if (ts == 0 && rel == 0) || ts <= prevTS || rel < prevRel {
			break
		}
		entries = append(entries, TimeEntry{Timestamp: ts, Offset: baseOffset + int64(rel)})
		prevTS, prevRel = ts, rel
	}
	if err := zeroAfter(buf, len(entries)*TimeEntrySize, n*TimeEntrySize); err != nil {
		return entries, err
	}
	if rem := len(buf) % TimeEntrySize; rem != 0 {
		return entries, kafkalog.Corruptf(int64(n*TimeEntrySize), "truncated time index entry: %d of %d bytes", rem, TimeEntrySize)
	}
	return entries, nil
}

// zeroAfter reports the first non-zero byte of buf[from:to] as corruption:
// past the real end an index may hold only preallocated zeros.
func zeroAfter(buf []byte, from, to int) error {
	for i := from; i < to; i++ {
		if buf[i] != 0 {
			return kafkalog.Corruptf(int64(i), "non-zero bytes after the last index entry (entry at byte %d does not follow the previous one)", from)
		}
	}
	return nil
}

// realAfterZero reports whether e, the bytes after a first time index
// entry of zeros, starts with an entry that can follow (0, base): a
// timestamp above 0 and a relative offset of 0 or more.
func realAfterZero(e []byte) bool {
	if len(e) < TimeEntrySize {
		return false
	}
	return int64(binary.BigEndian.Uint64(e)) > 0 && int32(binary.BigEndian.Uint32(e[8:])) >= 0
}

// LookupOffset returns the entry with the largest offset <= target, and
// false when every entry is above target (scan from position 0).
func LookupOffset(entries []OffsetEntry, target int64) (OffsetEntry, bool) {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].Offset > target })
	if i == 0 {
		return OffsetEntry{}, false
	}
	return entries[i-1], true
}

// LookupTime returns the entry with the largest timestamp < ts, and false
// when there is none (scan from the segment's start). Every record up to
// the entry's offset has a timestamp below ts.
func LookupTime(entries []TimeEntry, ts int64) (TimeEntry, bool) {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].Timestamp >= ts })
	if i == 0 {
		return TimeEntry{}, false
	}
	return entries[i-1], true
}

// relative converts an absolute offset to the int32 an index stores.
func relative(offset, baseOffset int64) (int32, error) {
	rel := offset - baseOffset
	if rel < 0 || rel > math.MaxInt32 {
		return 0, fmt.Errorf("index: offset %d not within int32 of base offset %d", offset, baseOffset)
	}
	return int32(rel), nil
}

// AppendOffsetEntry appends the 8-byte encoding of e to dst. It fails when
// e.Offset is below baseOffset or more than MaxInt32 above it.
func AppendOffsetEntry(dst []byte, baseOffset int64, e OffsetEntry) ([]byte, error) {
	rel, err := relative(e.Offset, baseOffset)
	if err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(rel))
	return binary.BigEndian.AppendUint32(dst, uint32(e.Position)), nil
}

// AppendTimeEntry appends the 12-byte encoding of e to dst, with the same
// offset rule as AppendOffsetEntry.
func AppendTimeEntry(dst []byte, baseOffset int64, e TimeEntry) ([]byte, error) {
	rel, err := relative(e.Offset, baseOffset)
	if err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
	return binary.BigEndian.AppendUint32(dst, uint32(rel)), nil
}

// AbortedTxn is one .txnindex entry: a transaction of ProducerID aborted
// over [FirstOffset, LastOffset], with the last stable offset at the abort.
type AbortedTxn struct {
	Version          int16
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// ParseTxnIndex decodes a .txnindex file. An empty file gives no entries.
// A partial trailing entry or an unknown version is corrupt.
func ParseTxnIndex(buf []byte) ([]AbortedTxn, error) {
	n := len(buf) / TxnEntrySize
	out := make([]AbortedTxn, 0, n)
	be := binary.BigEndian
	for i := 0; i < n; i++ {
		e := buf[i*TxnEntrySize:]
		t := AbortedTxn{
			Version:          int16(be.Uint16(e)),
			ProducerID:       int64(be.Uint64(e[2:])),
			FirstOffset:      int64(be.Uint64(e[10:])),
			LastOffset:       int64(be.Uint64(e[18:])),
			LastStableOffset: int64(be.Uint64(e[26:])),
		}
		if t.Version != 0 {
			return out, kafkalog.Corruptf(int64(i*TxnEntrySize), "unknown transaction index version %d", t.Version)
		}
		out = append(out, t)
	}
	if rem := len(buf) % TxnEntrySize; rem != 0 {
		return out, kafkalog.Corruptf(int64(n*TxnEntrySize), "truncated transaction index entry: %d of %d bytes", rem, TxnEntrySize)
	}
	return out, nil
}
