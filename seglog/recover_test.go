package seglog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

const crashValue = 3000

// crashedLog writes records over several segments and abandons the Log
// without Close, as a killed process would: the active segment's indexes
// stay preallocated and untrimmed.
func crashedLog(t *testing.T) (dir string, active string, activeBase int64) {
	dir = filepath.Join(t.TempDir(), "crash-0")
	l := mustOpen(t, dir, smallConfig())
	fill(t, l, 800, crashValue)
	segs := l.Segments()
	activeBase = segs[len(segs)-1].BaseOffset
	if len(segs) < 3 || segs[len(segs)-1].Size == 0 {
		t.Fatalf("want a non-empty active segment after rolls: %+v", segs)
	}
	return dir, filepath.Join(dir, kafkalog.FileName(activeBase, kafkalog.LogSuffix)), activeBase
}

// lastBatchStart returns the position of the last batch of a log file.
func lastBatchStart(t *testing.T, path string) (int64, int64) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := batch.NewScanner(bytes.NewReader(data), int64(len(data)), batch.ScanOptions{})
	var last batch.Batch
	for s.Next() {
		last = s.Batch()
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	return last.Position, int64(len(data))
}

func TestCrashRecovery(t *testing.T) {
	for name, tc := range map[string]struct {
		damage func(t *testing.T, dir, active string)
		lost   int64 // records lost from the tail (never more than the damaged batch)
		broken bool  // a .broken file keeps the cut bytes
	}{
		"clean crash, untrimmed indexes": {damage: func(*testing.T, string, string) {}},
		"torn last batch": {lost: 1, broken: true, damage: func(t *testing.T, dir, active string) {
			start, size := lastBatchStart(t, active)
			if err := os.Truncate(active, start+(size-start)/2); err != nil {
				t.Fatal(err)
			}
		}},
		"torn header": {lost: 1, broken: true, damage: func(t *testing.T, dir, active string) {
			start, _ := lastBatchStart(t, active)
			if err := os.Truncate(active, start+10); err != nil {
				t.Fatal(err)
			}
		}},
		"flipped byte in last batch": {lost: 1, broken: true, damage: func(t *testing.T, dir, active string) {
			start, _ := lastBatchStart(t, active)
			f, _ := os.OpenFile(active, os.O_RDWR, 0)
			defer f.Close()
			f.WriteAt([]byte{0xAA}, start+100)
		}},
		"zeros after the last batch": {broken: true, damage: func(t *testing.T, dir, active string) {
			f, _ := os.OpenFile(active, os.O_RDWR|os.O_APPEND, 0)
			defer f.Close()
			f.Write(make([]byte, 4096))
		}},
		"active indexes deleted": {damage: func(t *testing.T, dir, active string) {
			os.Remove(active[:len(active)-4] + kafkalog.IndexSuffix)
			os.Remove(active[:len(active)-4] + kafkalog.TimeIndexSuffix)
		}},
		"active index garbage": {damage: func(t *testing.T, dir, active string) {
			os.WriteFile(active[:len(active)-4]+kafkalog.IndexSuffix, bytes.Repeat([]byte{0x7f}, 99), 0o644)
		}},
		"rolled segment index untrimmed": {damage: func(t *testing.T, dir, active string) {
			p := filepath.Join(dir, kafkalog.FileName(0, kafkalog.IndexSuffix))
			f, _ := os.OpenFile(p, os.O_RDWR, 0)
			defer f.Close()
			st, _ := f.Stat()
			f.Truncate(st.Size() + 80000)
		}},
		"rolled segment index points past its log": {damage: func(t *testing.T, dir, active string) {
			p := filepath.Join(dir, kafkalog.FileName(0, kafkalog.IndexSuffix))
			buf, _ := index.AppendOffsetEntry(nil, 0, index.OffsetEntry{Offset: 5, Position: 1 << 30})
			os.WriteFile(p, buf, 0o644)
		}},
		"leftover files": {damage: func(t *testing.T, dir, active string) {
			os.WriteFile(filepath.Join(dir, "leader-epoch-checkpoint.tmp"), []byte("junk"), 0o644)
			os.WriteFile(filepath.Join(dir, "00000000000000009999.index"), make([]byte, 80), 0o644)
			os.WriteFile(filepath.Join(dir, "00000000000000000001.log.deleted"), []byte("x"), 0o644)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			dir, active, _ := crashedLog(t)
			tc.damage(t, dir, active)
			l, err := Open(dir, smallConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if got, want := l.HighWatermark(), 800-tc.lost; got != want {
				t.Fatalf("high watermark %d, want %d", got, want)
			}
			readAll(t, l, crashValue)
			brokenFiles, _ := filepath.Glob(filepath.Join(dir, "*.broken"))
			if tc.broken != (len(brokenFiles) == 1) {
				t.Fatalf("broken files %v", brokenFiles)
			}
			for _, leftover := range []string{"leader-epoch-checkpoint.tmp", "00000000000000009999.index", "00000000000000000001.log.deleted"} {
				if _, err := os.Stat(filepath.Join(dir, leftover)); err == nil {
					t.Errorf("%s not cleaned up", leftover)
				}
			}
			// Appends continue at the recovered end.
			fill(t, l, 50, crashValue)
			readAll(t, l, crashValue)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			checkIndexes(t, dir)
			l2 := mustOpen(t, dir, smallConfig())
			defer l2.Close()
			if l2.HighWatermark() != 850-tc.lost {
				t.Fatalf("after reopen: high watermark %d", l2.HighWatermark())
			}
		})
	}
}

// TestCorruptRolledSegment: a rolled segment whose log is damaged and whose
// indexes must be rebuilt makes Open fail with a corruption error that
// names the file, instead of silently dropping data.
func TestCorruptRolledSegment(t *testing.T) {
	dir, _, _ := crashedLog(t)
	p := filepath.Join(dir, kafkalog.FileName(0, kafkalog.LogSuffix))
	f, _ := os.OpenFile(p, os.O_RDWR, 0)
	f.WriteAt([]byte{9}, 16) // bad magic in the first batch
	f.Close()
	os.Remove(filepath.Join(dir, kafkalog.FileName(0, kafkalog.IndexSuffix)))
	_, err := Open(dir, smallConfig())
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(p)) {
		t.Fatalf("Open = %v, want a corruption error naming %s", err, p)
	}
	if st, _ := os.Stat(p); st.Size() < 1000 {
		t.Fatal("the damaged rolled segment was truncated")
	}
}

// TestOpenRealLogs opens copies of real broker partition directories: the
// log reads back, indexes are rebuilt where the broker's are missing, and
// appends continue (v2 after magic 1 in the legacy case).
func TestOpenRealLogs(t *testing.T) {
	for _, tc := range []struct {
		dir     string
		hw      int64
		tsQuery int64
		tsWant  int64
	}{
		{"ldi-kafka370-kraft/__consumer_offsets-6", 13, 1769792518093, 7},
		{"xpx-kafka0101-magic1/tmp/kafka-logs/TEST-TOPIC-0", 21211, 0, 0},
		{"iechenyb-2019-plain/kafka-logs/string-key-0", 28162, 1560826431837, 31}, // batch 18..30 ends at ts ...836; batch 31.. starts at ...837
		{"berkay-kafkajs-gzip/kafka-data/topic-logx-001-1", 16, 0, 0},
		{"sharaweil-kafka0110/data/test0-2", 11, 0, 0},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			src := testfixtures.Path(t, tc.dir)
			dst := filepath.Join(t.TempDir(), filepath.Base(tc.dir))
			copyDir(t, src, dst)
			l, err := Open(dst, smallConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.HighWatermark() != tc.hw || l.LogStartOffset() != 0 {
				t.Fatalf("range [%d, %d), want [0, %d)", l.LogStartOffset(), l.HighWatermark(), tc.hw)
			}
			seen := int64(0)
			for off := int64(0); off < tc.hw; {
				data, err := l.Read(off, 64<<10)
				if err != nil || len(data) == 0 {
					t.Fatalf("read %d: %d bytes, %v", off, len(data), err)
				}
				s := batch.NewScanner(bytes.NewReader(data), int64(len(data)), batch.ScanOptions{VerifyCRC: true})
				for s.Next() {
					if !s.CRCValid() {
						t.Fatalf("CRC mismatch reading %d", off)
					}
					off = s.Batch().LastOffset + 1
					seen++
				}
			}
			if tc.tsQuery != 0 {
				off, _, err := l.OffsetForTimestamp(tc.tsQuery)
				if err != nil || off != tc.tsWant {
					t.Errorf("OffsetForTimestamp(%d) = %d, %v; want %d", tc.tsQuery, off, err, tc.tsWant)
				}
			}
			if _, err := l.Append(Record{Value: []byte("after")}); err != nil {
				t.Fatal(err)
			}
			if l.HighWatermark() != tc.hw+1 {
				t.Errorf("high watermark after append %d", l.HighWatermark())
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			checkIndexes(t, dst)
			// The source fixtures are untouched.
			if _, err := os.Stat(filepath.Join(src, "00000000000000000000.log")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
