package copier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// tenBatches writes a rolled segment at 0 of ten one-record batches of 78
// bytes (780 bytes), followed by tail, and an empty active segment at 10.
// It returns the 780 bytes of batches.
func tenBatches(t *testing.T, r *rig, tail []byte) []byte {
	t.Helper()
	if n := writeSegment(t, r.dir(), 0, seq(0, 10), same(r.now.UnixMilli(), 10), 10); n != 780 {
		t.Fatalf("segment of %d bytes, want 780", n)
	}
	p := filepath.Join(r.dir(), kafkalog.FileName(0, kafkalog.LogSuffix))
	log, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(bytes.Clone(log), tail...), 0o644); err != nil {
		t.Fatal(err)
	}
	writeSegment(t, r.dir(), 10, nil, nil, 0)
	return log
}

// readBack reads offset off from a finished copy as a fetch does (the
// copy's offset index, then a ranged read from the position it gives) and
// returns the bytes of the batch holding it.
func readBack(t *testing.T, r *rig, row remotelog.SegmentMetadata, off int64) []byte {
	t.Helper()
	ctx := context.Background()
	idx, err := r.mgr.FetchIndex(ctx, row, remotelog.OffsetIndex)
	if err != nil {
		t.Fatal(err)
	}
	pos := int64(0)
	for i := 0; i+8 <= len(idx); i += 8 {
		if row.StartOffset+int64(binary.BigEndian.Uint32(idx[i:])) <= off {
			pos = int64(binary.BigEndian.Uint32(idx[i+4:]))
		}
	}
	rc, err := r.mgr.FetchLogSegment(ctx, row, pos, row.SizeInBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	s := batch.NewScanner(bytes.NewReader(data), int64(len(data)), batch.ScanOptions{VerifyCRC: true})
	for s.Next() {
		if b := s.Batch(); b.LastOffset >= off && s.CRCValid() {
			return data[b.Position:b.End()]
		}
	}
	t.Fatalf("offset %d not found in the copy (%v)", off, s.Err())
	return nil
}

// TestPreallocatedTailLeftOut: a rolled segment of 780 bytes of batches
// and 4096 zero bytes (log.preallocate=true) is copied as 780 bytes,
// reported once, reads back batch for batch, and is deleted by local
// retention as an exact copy; a size change after the copy keeps it.
func TestPreallocatedTailLeftOut(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	r := newRig(t, cfg, nil)
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	c, err := New(r.c.cfg, r.store, r.mgr, WithClock(func() time.Time { return r.now }), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	log := tenBatches(t, r, make([]byte, 4096))
	if n := r.sync(); n != 1 {
		t.Fatalf("copied %d", n)
	}
	fin, _ := r.store.FinishedSegments(r.tp)
	if len(fin) != 1 || fin[0].SizeInBytes != 780 || fin[0].LocalSizeInBytes != 780+4096 {
		t.Fatalf("finished rows %+v", fin)
	}
	a, err := r.bucket.Attributes(context.Background(), r.mgr.Key(fin[0], kafkalog.LogSuffix))
	if err != nil || a.Size != 780 {
		t.Fatalf("log object: %+v %v", a, err)
	}
	for off := int64(0); off < 10; off++ {
		if got := readBack(t, r, fin[0], off); !bytes.Equal(got, log[off*78:(off+1)*78]) {
			t.Fatalf("offset %d reads back %d bytes that differ from the local batch", off, len(got))
		}
	}
	r.sync()
	if got := testutilCounter(t, r.c.m.trimmedTails); got != 1 {
		t.Fatalf("trimmed tails counted %v times, want 1", got)
	}
	for _, want := range []string{"partition=orders-0", "base_offset=0", "valid_bytes=780", "file_bytes=4876"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log %q lacks %q", logs.String(), want)
		}
	}
	if n := strings.Count(logs.String(), "zero bytes after its last batch"); n != 1 {
		t.Fatalf("reported %d times", n)
	}

	// Local retention on: a file that grew after its copy is not the copy.
	r.c.cfg.Retention.LocalRetentionBytes = ptr(0)
	p := filepath.Join(r.dir(), kafkalog.FileName(0, kafkalog.LogSuffix))
	if err := os.WriteFile(p, append(bytes.Clone(log), make([]byte, 4097)...), 0o644); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{0, 10}) {
		t.Fatalf("changed file: local %v, want it kept", got)
	}
	// As it was at copy time, it goes.
	if err := os.Truncate(p, 780+4096); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if got := r.localBases(); !reflect.DeepEqual(got, []int64{10}) {
		t.Fatalf("local %v, want the copied segment deleted", got)
	}
	if off := r.offsets(); off.LocalLogStartOffset != 10 || off.LogStartOffset != 0 {
		t.Fatalf("offsets %+v", off)
	}
	for off := int64(0); off < 10; off++ {
		if got := readBack(t, r, fin[0], off); !bytes.Equal(got, log[off*78:(off+1)*78]) {
			t.Fatalf("after local deletion, offset %d reads back other bytes", off)
		}
	}
}

// TestNonZeroTailRefused: one non-zero byte anywhere after the last whole
// batch makes the segment corrupt: not copied, the error names the byte,
// the partition's tiering waits and nothing local is deleted.
func TestNonZeroTailRefused(t *testing.T) {
	for _, at := range []int{0, 8, 16, 17, 61, 2000, 4095} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.FileDeleteDelayMs = 0
			cfg.Retention.LocalRetentionBytes = ptr(0)
			r := newRig(t, cfg, nil)
			tail := make([]byte, 4096)
			tail[at] = 0x01
			tenBatches(t, r, tail)
			writeSegment(t, r.dir(), 20, nil, nil, 0) // 10 is rolled too: it must wait
			n, err := r.c.Sync(context.Background())
			if n != 0 || !errors.Is(err, errCorruptSegment) {
				t.Fatalf("copied %d, err %v", n, err)
			}
			if want := fmt.Sprintf("first non-zero byte after it is at byte %d", 780+at); !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name byte %d", err, 780+at)
			}
			if rows, _ := r.store.Segments(r.tp); len(rows) != 0 || len(r.objects()) != 0 {
				t.Fatalf("rows %v objects %v", rows, r.objects())
			}
			if got := r.localBases(); !reflect.DeepEqual(got, []int64{0, 10, 20}) {
				t.Fatalf("local %v", got)
			}
			if got := testutilCounter(t, r.c.m.corrupt); got != 1 {
				t.Fatalf("corrupt counted %v", got)
			}
		})
	}
}

// TestChangedBaseOffsetRefused: a batch whose base offset was changed
// (outside its CRC, which stays valid) makes the segment corrupt, reported
// at the batch's position.
func TestChangedBaseOffsetRefused(t *testing.T) {
	for _, tc := range []struct {
		batch int
		base  int64
		why   string
	}{
		{5, 3, "is not after the previous entry's last offset 4"},
		{0, 7, "is not after"}, // batch 1 then follows offset 7
		{9, 10, "past the segment's last offset 9"},
	} {
		t.Run(fmt.Sprint(tc.batch, "-", tc.base), func(t *testing.T) {
			r := newRig(t, DefaultConfig(), nil)
			log := tenBatches(t, r, nil)
			binary.BigEndian.PutUint64(log[tc.batch*78:], uint64(tc.base))
			if !batch.CheckCRC(log[tc.batch*78 : (tc.batch+1)*78]) {
				t.Fatal("the base offset is covered by the CRC?")
			}
			os.WriteFile(filepath.Join(r.dir(), kafkalog.FileName(0, kafkalog.LogSuffix)), log, 0o644)
			n, err := r.c.Sync(context.Background())
			if n != 0 || !errors.Is(err, errCorruptSegment) {
				t.Fatalf("copied %d, err %v", n, err)
			}
			pos := tc.batch * 78
			if tc.batch == 0 {
				pos = 78 // batch 0 now ends at 7: batch 1 breaks the order
			}
			if want := fmt.Sprintf("corrupt data at byte %d: ", pos); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("error %q, want %q and %q", err, want, tc.why)
			}
			if rows, _ := r.store.Segments(r.tp); len(rows) != 0 {
				t.Fatalf("rows %v", rows)
			}
		})
	}
}

// TestMaxTimestampZeroTail: a segment without time index entries is
// judged by a scan of its batches, which ends at a zero tail (and fails on
// non-zero bytes after the last batch).
func TestMaxTimestampZeroTail(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	tail := make([]byte, 4096)
	noTimeIndex := func() {
		os.WriteFile(filepath.Join(r.dir(), kafkalog.FileName(0, kafkalog.TimeIndexSuffix)), make([]byte, 120), 0o644)
	}
	tenBatches(t, r, tail)
	noTimeIndex()
	segs, err := listSegments(r.dir())
	if err != nil {
		t.Fatal(err)
	}
	if ts, err := r.c.maxTimestamp(segs[0]); err != nil || ts != r.now.UnixMilli() {
		t.Fatalf("max timestamp %d, %v; want %d", ts, err, r.now.UnixMilli())
	}
	tail[100] = 7
	tenBatches(t, r, tail)
	noTimeIndex()
	segs, _ = listSegments(r.dir())
	if _, err := newRigCopier(t, r).maxTimestamp(segs[0]); !errors.Is(err, kafkalog.ErrCorrupt) {
		t.Fatalf("non-zero tail: %v", err)
	}
}

// newRigCopier returns a second copier over the rig's store and bucket,
// with empty caches.
func newRigCopier(t *testing.T, r *rig) *Copier {
	c, err := New(r.c.cfg, r.store, r.mgr, WithClock(func() time.Time { return r.now }))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCopiedExactly: a copy matches a local segment by offsets and by the
// size of the local .log, the copy's or, for a copy that left out a zero
// tail, the file's at copy time.
func TestCopiedExactly(t *testing.T) {
	whole := remotelog.SegmentMetadata{StartOffset: 0, EndOffset: 9, SizeInBytes: 780}
	trimmed := remotelog.SegmentMetadata{StartOffset: 0, EndOffset: 9, SizeInBytes: 780, LocalSizeInBytes: 4876}
	for _, tc := range []struct {
		row  remotelog.SegmentMetadata
		seg  localSegment
		want bool
	}{
		{whole, localSegment{base: 0, end: 9, size: 780}, true},
		{whole, localSegment{base: 0, end: 9, size: 4876}, false},
		{trimmed, localSegment{base: 0, end: 9, size: 4876}, true},
		{trimmed, localSegment{base: 0, end: 9, size: 780}, true}, // the broker trimmed the file since
		{trimmed, localSegment{base: 0, end: 9, size: 4877}, false},
		{trimmed, localSegment{base: 0, end: 10, size: 4876}, false},
		{remotelog.SegmentMetadata{StartOffset: 0, EndOffset: 9}, localSegment{base: 0, end: 9, size: 0}, true},
	} {
		if got := copiedExactly([]remotelog.SegmentMetadata{tc.row}, tc.seg); got != tc.want {
			t.Errorf("row %d/%d, local %+v: %v", tc.row.SizeInBytes, tc.row.LocalSizeInBytes, tc.seg, got)
		}
	}
}

// TestInspectFixtures: no real broker segment is refused by inspect's
// checks; each is bounded by the next segment of its directory (the last
// one by nothing) and copied whole.
func TestInspectFixtures(t *testing.T) {
	root := testfixtures.Dir(t)
	dirs := map[string][]int64{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if f, ok := kafkalog.ParseFileName(d.Name()); ok && f.Live && f.Suffix == kafkalog.LogSuffix {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], f.BaseOffset)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for dir, bases := range dirs {
		sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
		for i, base := range bases {
			end := int64(math.MaxInt64)
			if i+1 < len(bases) {
				end = bases[i+1] - 1
			}
			s := localSegment{base: base, end: end, path: filepath.Join(dir, kafkalog.FileName(base, kafkalog.LogSuffix))}
			st := &staged{log: s.path}
			if _, err := os.Stat(s.file(kafkalog.IndexSuffix)); err == nil {
				st.offsetIdx = s.file(kafkalog.IndexSuffix)
			}
			if _, err := os.Stat(s.file(kafkalog.TimeIndexSuffix)); err == nil {
				st.timeIdx = s.file(kafkalog.TimeIndexSuffix)
			}
			in, err := inspect(s, st, 4096)
			if err != nil {
				t.Errorf("%s: %v", s.path, err)
			} else if in.size != in.fileSize {
				t.Errorf("%s: copy of %d of %d bytes", s.path, in.size, in.fileSize)
			}
			n++
		}
	}
	if n < 30 {
		t.Fatalf("inspected %d fixture segments", n)
	}
}
