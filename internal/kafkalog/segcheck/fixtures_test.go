package segcheck

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// fixtureSegment is one real broker segment of ../shared/fixtures/real.
type fixtureSegment struct {
	path      string // the .log
	base, end int64  // end: the next segment's base offset - 1, or -1 for the last
}

// fixtureSegments lists every live .log of the real fixtures, each
// bounded by the next segment of its directory.
func fixtureSegments(t *testing.T) []fixtureSegment {
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
	var out []fixtureSegment
	for dir, bases := range dirs {
		sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
		for i, base := range bases {
			end := int64(-1)
			if i+1 < len(bases) {
				end = bases[i+1] - 1
			}
			out = append(out, fixtureSegment{path: filepath.Join(dir, kafkalog.FileName(base, kafkalog.LogSuffix)), base: base, end: end})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// readOptional reads a file, nil when it does not exist.
func readOptional(t *testing.T, p string) []byte {
	data, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestFixtures: no segment a real broker wrote is refused; each is
// copied whole (none ends in zeros); every index the broker left beside
// its log is usable; and the indexes rebuilt by Kafka's rule (at the
// default index.interval.bytes, 4096) hold exactly the broker's entries.
func TestFixtures(t *testing.T) {
	segs := fixtureSegments(t)
	if len(segs) < 30 {
		t.Fatalf("found %d fixture segments", len(segs))
	}
	withIndexes := 0
	for _, s := range segs {
		f, err := os.Open(s.path)
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		stem := strings.TrimSuffix(s.path, kafkalog.LogSuffix)
		in := Input{Name: s.path, Base: s.base, End: s.end, Log: f, LogSize: st.Size(), IndexIntervalBytes: 4096,
			OffsetIndex: readOptional(t, stem+kafkalog.IndexSuffix), TimeIndex: readOptional(t, stem+kafkalog.TimeIndexSuffix)}
		res, err := Inspect(in)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", s.path, err)
			continue
		}
		if res.Size != st.Size() || res.FileSize != st.Size() {
			t.Errorf("%s: copy of %d of %d bytes", s.path, res.Size, res.FileSize)
		}
		if in.OffsetIndex == nil || in.TimeIndex == nil {
			if res.IndexesOK {
				t.Errorf("%s: indexes OK without both files", s.path)
			}
			continue
		}
		withIndexes++
		if !res.IndexesOK {
			t.Errorf("%s: the broker's indexes refused: %s", s.path, res.IndexProblem)
		}
		theirs, err := index.ParseOffsetIndex(in.OffsetIndex, s.base)
		if err != nil {
			t.Fatal(err)
		}
		theirTimes, err := index.ParseTimeIndex(in.TimeIndex, s.base)
		if err != nil {
			t.Fatal(err)
		}
		ours, ourTimes, err := res.Rebuilt.Encode(s.base)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, in.OffsetIndex[:len(theirs)*index.OffsetEntrySize]) {
			t.Errorf("%s: rebuilt offset index %v, the broker's %v", s.path, res.Rebuilt.Offsets, theirs)
		}
		if !bytes.Equal(ourTimes, in.TimeIndex[:len(theirTimes)*index.TimeEntrySize]) {
			t.Errorf("%s: rebuilt time index %v, the broker's %v", s.path, res.Rebuilt.Times, theirTimes)
		}
	}
	if withIndexes < 5 {
		t.Errorf("%d fixture segments with both indexes, want at least 5", withIndexes)
	}
}

// largestFixture returns the bytes of the largest real .log with its base
// and end offsets.
func largestFixture(t *testing.T) (fixtureSegment, []byte) {
	var best fixtureSegment
	var size int64 = -1
	for _, s := range fixtureSegments(t) {
		if st, err := os.Stat(s.path); err == nil && st.Size() > size {
			best, size = s, st.Size()
		}
	}
	data, err := os.ReadFile(best.path)
	if err != nil {
		t.Fatal(err)
	}
	return best, data
}

// TestFixtureDamage: one byte changed anywhere in a real broker's
// largest segment (2 MB, 28,068 batches) makes Inspect refuse it with
// ErrCorruptSegment and a *kafkalog.CorruptionError naming the file and
// the byte position of the batch the byte is in (a record byte breaks
// the CRC; a byte of the base offset, which no CRC covers, breaks the
// offset rules at that batch).
func TestFixtureDamage(t *testing.T) {
	s, clean := largestFixture(t)
	starts := batchStarts(t, clean)
	if len(starts) < 1000 {
		t.Fatalf("%s: %d batches", s.path, len(starts))
	}
	for _, tc := range []struct {
		name string
		at   int64 // the byte changed, from a batch's start
		mask byte  // what it is XORed with
	}{
		{"record byte", 61, 0x5a},
		{"CRC byte", 17, 0x5a},
		{"base offset's sign bit", 0, 0x80}, // a negative base offset: below the segment's base
	} {
		for _, i := range []int{0, len(starts) / 2, len(starts) - 1} {
			data := bytes.Clone(clean)
			pos := starts[i] + tc.at
			data[pos] ^= tc.mask
			_, err := Inspect(Input{Name: s.path, Base: s.base, End: s.end, Log: bytes.NewReader(data), LogSize: int64(len(data)), IndexIntervalBytes: 4096})
			var ce *kafkalog.CorruptionError
			if !errors.Is(err, ErrCorruptSegment) || !errors.As(err, &ce) {
				t.Errorf("%s of batch %d (byte %d): %v; want ErrCorruptSegment with a CorruptionError", tc.name, i, pos, err)
				continue
			}
			if ce.File != s.path || ce.Position != starts[i] {
				t.Errorf("%s of batch %d (byte %d): corruption reported in %s at byte %d; want %s at byte %d", tc.name, i, pos, ce.File, ce.Position, s.path, starts[i])
			}
		}
	}
}

// batchStarts returns the byte positions of a clean log's batches.
func batchStarts(t *testing.T, log []byte) []int64 {
	var out []int64
	sc := batch.NewScanner(bytes.NewReader(log), int64(len(log)), batch.ScanOptions{})
	for sc.Next() {
		out = append(out, sc.Batch().Position)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
