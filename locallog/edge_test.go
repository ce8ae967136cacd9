package locallog

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
)

// legacyMessage encodes one uncompressed magic 1 message.
func legacyMessage(offset, ts int64, val []byte) []byte {
	body := []byte{1, 0}
	body = binary.BigEndian.AppendUint64(body, uint64(ts))
	body = binary.BigEndian.AppendUint32(body, 0xffffffff) // null key
	body = binary.BigEndian.AppendUint32(body, uint32(len(val)))
	body = append(body, val...)
	out := binary.BigEndian.AppendUint64(nil, uint64(offset))
	out = binary.BigEndian.AppendUint32(out, uint32(4+len(body)))
	out = binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(body))
	return append(out, body...)
}

// TestLargeEntries serves entries larger than the scan window (a v2 batch
// and a legacy message of a few hundred KiB) from the active segment,
// whose tail is CRC-checked in pieces, and from a rolled one.
func TestLargeEntries(t *testing.T) {
	dir := partitionDir(t)
	big := bytes.Repeat([]byte("x"), 300<<10)
	writeSegment(t, dir, 0, ent{base: 0, n: 2})
	appendRaw(t, segPath(dir, 0, kafkalog.LogSuffix), legacyMessage(2, 1_700_000_000_500, big))
	appendRaw(t, segPath(dir, 0, kafkalog.LogSuffix), legacyMessage(3, 1_700_000_000_400, []byte("small")))
	writeSegment(t, dir, 0, ent{base: 4, n: 3, ts: 1_700_000_000_900}, ent{base: 7, n: 1, val: big})
	t.Run("active", func(t *testing.T) { checkFixture(t, dir) })
	writeSegment(t, dir, 8, ent{base: 8, n: 1})
	t.Run("rolled", func(t *testing.T) { checkFixture(t, dir) })
	// A flipped byte deep inside the large active batch ends the served
	// log before it.
	q := mustOpen(t, dir, Options{})
	if err := os.Remove(segPath(dir, 8, kafkalog.LogSuffix)); err != nil {
		t.Fatal(err)
	}
	ref := reference(t, dir)
	last := ref[len(ref)-1]
	patch(t, segPath(dir, 0, kafkalog.LogSuffix), last.b.Position+200<<10, 'y')
	if o := mustOffsets(t, q); o.HighWatermark != 7 {
		t.Fatalf("Offsets = %+v, want HW 7 (before the damaged batch)", o)
	}
}

// TestListingCache: the directory is listed again when its mtime changes
// and not otherwise (a change that keeps the mtime goes unseen until the
// next one), and a listing taken right after a change is redone.
func TestListingCache(t *testing.T) {
	dir := partitionDir(t)
	writeSegment(t, dir, 0, ent{base: 0, n: 2})
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dir, past, past); err != nil {
		t.Fatal(err)
	}
	p := mustOpen(t, dir, Options{})
	if p.cur.racy {
		t.Fatal("a listing an hour after the last change is racy")
	}
	// A new segment, with the directory's mtime put back: unseen.
	writeSegment(t, dir, 2, ent{base: 2, n: 1})
	if err := os.Chtimes(dir, past, past); err != nil {
		t.Fatal(err)
	}
	if o := mustOffsets(t, p); o.HighWatermark != 2 {
		t.Fatalf("Offsets = %+v: the listing was redone with an unchanged mtime", o)
	}
	// Another change moves the mtime: both segments are seen.
	writeSegment(t, dir, 3, ent{base: 3, n: 1})
	if o := mustOffsets(t, p); o.HighWatermark != 4 || len(p.cur.segs) != 3 {
		t.Fatalf("Offsets = %+v with %d segments after an mtime change", o, len(p.cur.segs))
	}
	if !p.cur.racy {
		t.Fatal("a listing right after a change is not racy")
	}
}

// TestTruncatedInPlace: an active segment cut below what was scanned (a
// broker truncating after a leader change) is scanned again from its
// start.
func TestTruncatedInPlace(t *testing.T) {
	dir := partitionDir(t)
	writeSegment(t, dir, 0, ent{base: 0, n: 2}, ent{base: 2, n: 2}, ent{base: 4, n: 2})
	p := mustOpen(t, dir, Options{})
	if o := mustOffsets(t, p); o.HighWatermark != 6 {
		t.Fatalf("Offsets = %+v", o)
	}
	first := int64(len(ent{base: 0, n: 2}.encode(t)))
	if err := os.Truncate(segPath(dir, 0, kafkalog.LogSuffix), first); err != nil {
		t.Fatal(err)
	}
	if o := mustOffsets(t, p); o.HighWatermark != 2 {
		t.Fatalf("after truncation: Offsets = %+v, want HW 2", o)
	}
	writeSegment(t, dir, 0, ent{base: 2, n: 5})
	if o := mustOffsets(t, p); o.HighWatermark != 7 {
		t.Fatalf("after new appends: Offsets = %+v, want HW 7", o)
	}
	data, err := p.Read(2, 1<<20, 7)
	if err != nil || len(parseEntries(t, data)) != 1 || parseEntries(t, data)[0].LastOffset != 6 {
		t.Fatalf("Read(2) after truncation: %v", err)
	}
}

// TestMaxTimestampHeaderMismatch: a batch whose header max timestamp no
// record carries answers with its own largest record timestamp.
func TestMaxTimestampHeaderMismatch(t *testing.T) {
	dir := partitionDir(t)
	raw := ent{base: 0, n: 3, ts: 1_700_000_000_000}.encode(t)
	binary.BigEndian.PutUint64(raw[35:], 1_700_000_009_999)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(segPath(dir, 0, kafkalog.LogSuffix), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	p := mustOpen(t, dir, Options{})
	o, ts, found, err := p.MaxTimestamp(1 << 40)
	if err != nil || !found || o != 2 || ts != 1_700_000_000_002 {
		t.Fatalf("MaxTimestamp = %d, %d, %v, %v; want 2, 1700000000002", o, ts, found, err)
	}
}
