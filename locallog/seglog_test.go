package locallog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/seglog"
)

var codecs = []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd}

// value is the record value written at offset: checkable from the offset.
func value(offset int64, size int) []byte {
	v := bytes.Repeat([]byte{byte(offset)}, size)
	copy(v, fmt.Sprintf("v%d:", offset))
	return v
}

// appendBatches appends n batches to l, each of 1..maxRecs records, with
// every codec in turn and timestamps that go up and down, rolling every
// rollEvery batches (0: never).
func appendBatches(t testing.TB, l *seglog.Log, rng *rand.Rand, n, maxRecs, rollEvery int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if rollEvery > 0 && i > 0 && i%rollEvery == 0 {
			if err := l.Roll(); err != nil {
				t.Error(err)
				return
			}
		}
		next := l.HighWatermark()
		recs := make([]seglog.Record, 1+rng.Intn(maxRecs))
		for j := range recs {
			off := next + int64(j)
			recs[j] = seglog.Record{Key: []byte(fmt.Sprint(off)), Value: value(off, 50+rng.Intn(400)),
				Timestamp: 1_700_000_000_000 + int64(rng.Intn(100_000)) + off*10}
		}
		if _, err := l.AppendBatch(codecs[i%len(codecs)], recs...); err != nil {
			t.Error(err)
			return
		}
	}
}

// newSeglog creates orders-0 under a temp dir with small index intervals
// so that rolled segments have real .index entries.
func newSeglog(t testing.TB) (*seglog.Log, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "orders-0")
	cfg := seglog.DefaultConfig()
	cfg.IndexIntervalBytes = 512
	l, err := seglog.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dir
}

// TestSeglogDir reads back a log written by seglog with every codec and
// several segments, while seglog keeps it open (preallocated indexes of the
// active segment) and after it closed it: every entry byte for byte, from
// every record offset, by timestamp and max timestamp.
func TestSeglogDir(t *testing.T) {
	l, dir := newSeglog(t)
	appendBatches(t, l, rand.New(rand.NewSource(1)), 300, 12, 70)
	t.Run("open", func(t *testing.T) { checkFixture(t, dir) })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	t.Run("closed", func(t *testing.T) { checkFixture(t, dir) })
	if n := len(mustOpen(t, dir, Options{}).cur.segs); n != 5 {
		t.Fatalf("%d segments, want 5", n)
	}
}

// TestConcurrentAppend reads a log while seglog appends to it and rolls
// it: every answer is whole, CRC-valid entries with the offsets and values
// written, never a torn entry, and the readers reach the final end.
func TestConcurrentAppend(t *testing.T) {
	l, dir := newSeglog(t)
	p := mustOpen(t, dir, Options{})
	const batches = 300
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		appendBatches(t, l, rand.New(rand.NewSource(2)), batches, 5, 70)
	}()
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(maxBytes int) {
			defer wg.Done()
			next := int64(0)
			for {
				finished := done.Load()
				o, err := p.Offsets()
				if err != nil {
					t.Error(err)
					return
				}
				for next < o.HighWatermark {
					data, err := p.Read(next, maxBytes, o.HighWatermark)
					if err != nil {
						t.Errorf("Read(%d): %v", next, err)
						return
					}
					if next = checkWritten(t, data, next); next < 0 {
						return
					}
				}
				if finished && next == l.HighWatermark() {
					return
				}
				runtime.Gosched() // caught up: let the writer append

			}
		}([]int{4000, 1 << 20}[r])
	}
	wg.Wait()
}

// checkWritten checks that data holds whole entries starting at offset
// next with the values appendBatches writes, and returns the offset after
// them (-1 after reporting a problem).
func checkWritten(t testing.TB, data []byte, next int64) int64 {
	if len(data) == 0 {
		t.Errorf("empty answer below the high watermark at %d", next)
		return -1
	}
	for pos := 0; pos < len(data); {
		b, err := parseServed(data[pos:], 0)
		if err != nil || !batch.CheckCRC(data[pos:pos+int(b.Size)]) {
			t.Errorf("torn or invalid entry at %d: %v", next, err)
			return -1
		}
		recs, err := batch.Records(data[pos:pos+int(b.Size)], codec.Kafka)
		if err != nil {
			t.Errorf("records at %d: %v", next, err)
			return -1
		}
		for _, r := range recs {
			if r.Offset != next || !bytes.Equal(r.Value, value(next, len(r.Value))) {
				t.Errorf("record at %d: offset %d, value %q", next, r.Offset, r.Value[:min(len(r.Value), 12)])
				return -1
			}
			next++
		}
		pos += int(b.Size)
	}
	return next
}

// segmentFiles returns the live .log paths of dir in base order.
func segmentFiles(t testing.TB, p *Partition) []string {
	t.Helper()
	l, err := p.acquire(true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	var out []string
	for _, s := range l.segs {
		out = append(out, s.path)
	}
	return out
}

// TestDeleteUnderReader deletes or renames the oldest segment between Open
// and Read, and between Read's listing and its first use of the file: the
// answer is ErrBelowLocalStart or ErrSegmentGone, or (when the file was
// already open) the right bytes, never a short or wrong entry.
func TestDeleteUnderReader(t *testing.T) {
	l, dir := newSeglog(t)
	appendBatches(t, l, rand.New(rand.NewSource(3)), 100, 4, 20)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ref := reference(t, dir)
	p := mustOpen(t, dir, Options{})
	segs := segmentFiles(t, p)
	first := ref[1].b.BaseOffset // inside the oldest segment

	// Renamed to .deleted after Open: a fresh listing has no such offset.
	if err := os.Rename(segs[0], segs[0]+kafkalog.DeletedSuffix); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Read(first, 1<<20, 1<<40); !errors.Is(err, ErrBelowLocalStart) {
		t.Fatalf("Read after rename: %v, want ErrBelowLocalStart", err)
	}
	if o, err := p.Offsets(); err != nil || o.LocalLogStartOffset <= first {
		t.Fatalf("Offsets after rename = %+v, %v", o, err)
	}

	// Deleted between Read's listing and its opening the file (Offsets
	// above opened every file of p: a fresh Partition).
	p = mustOpen(t, dir, Options{})
	victim := segs[1]
	second := firstEntryFrom(ref, mustBase(t, victim))
	p.testAcquired = func() { os.Remove(victim); p.testAcquired = nil }
	if data, err := p.Read(ref[second].b.BaseOffset, 1<<20, 1<<40); !errors.Is(err, ErrSegmentGone) {
		t.Fatalf("Read of a segment deleted before it was opened: %d bytes, %v; want ErrSegmentGone", len(data), err)
	}

	// Deleted after the file was opened by an earlier read: the read that
	// already holds the listing finishes from the open handle.
	third := firstEntryFrom(ref, mustBase(t, segs[2]))
	if _, err := p.Read(ref[third].b.BaseOffset, 1, 1<<40); err != nil {
		t.Fatal(err)
	}
	p.testAcquired = func() { os.Remove(segs[2]); p.testAcquired = nil }
	data, err := p.Read(ref[third+1].b.BaseOffset, 1, 1<<40)
	if err != nil {
		t.Fatalf("Read from an open handle of a deleted file: %v", err)
	}
	equalBytes(t, "read from a deleted file's handle", data, ref[third+1].raw)
	if _, err := p.Read(ref[third+1].b.BaseOffset, 1, 1<<40); !errors.Is(err, ErrBelowLocalStart) {
		t.Fatalf("next Read after delete: %v, want ErrBelowLocalStart", err)
	}
}

func mustBase(t testing.TB, path string) int64 {
	f, ok := kafkalog.ParseFileName(filepath.Base(path))
	if !ok {
		t.Fatalf("not a segment file: %s", path)
	}
	return f.BaseOffset
}

// TestConcurrentDelete deletes the oldest segments one by one (rename to
// .deleted, then remove, as local retention does) while readers read the
// whole log over and over: each answer is the right bytes or
// ErrBelowLocalStart/ErrSegmentGone.
func TestConcurrentDelete(t *testing.T) {
	l, dir := newSeglog(t)
	appendBatches(t, l, rand.New(rand.NewSource(4)), 240, 4, 20)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ref := reference(t, dir)
	all := concat(ref)
	posOf := map[int64]int{} // base offset of an entry -> its position in all
	at := 0
	for _, e := range ref {
		posOf[e.b.BaseOffset] = at
		at += len(e.raw)
	}
	p := mustOpen(t, dir, Options{})
	segs := segmentFiles(t, p)
	var wg sync.WaitGroup
	var stop atomic.Bool
	var reads atomic.Int64
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(maxBytes int) {
			defer wg.Done()
			for !stop.Load() {
				for i := 0; i < len(ref); i += 3 {
					reads.Add(1)
					off := ref[i].b.BaseOffset
					data, err := p.Read(off, maxBytes, 1<<40)
					if errors.Is(err, ErrBelowLocalStart) || errors.Is(err, ErrSegmentGone) {
						continue
					}
					if err != nil {
						t.Errorf("Read(%d): %v", off, err)
						return
					}
					if start := posOf[off]; len(data) == 0 || !bytes.Equal(data, all[start:start+len(data)]) {
						t.Errorf("Read(%d): %d bytes differ from the log", off, len(data))
						return
					}
					parseEntries(t, data)
				}
			}
		}(1 << (10 + 3*r))
	}
	for k, s := range segs[:len(segs)-1] {
		for reads.Load() < int64(100*(k+1)) && !t.Failed() {
			runtime.Gosched() // let the readers work between deletions
		}
		if err := os.Rename(s, s+kafkalog.DeletedSuffix); err != nil {
			t.Fatal(err)
		}
		for _, suffix := range []string{kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix} {
			idx := s[:len(s)-len(kafkalog.LogSuffix)] + suffix
			os.Rename(idx, idx+kafkalog.DeletedSuffix)
		}
		for reads.Load() < int64(100*(k+1)+50) && !t.Failed() {
			runtime.Gosched()
		}
		if err := os.Remove(s + kafkalog.DeletedSuffix); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	o, err := p.Offsets()
	if err != nil || o.LocalLogStartOffset != mustBase(t, segs[len(segs)-1]) {
		t.Fatalf("Offsets after deleting all rolled segments = %+v, %v", o, err)
	}
}
