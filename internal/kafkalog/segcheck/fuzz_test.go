package segcheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// fixCRCs recomputes the CRC of every v2 batch it can walk to from byte
// 0, so that the fuzzer's changes reach the checks behind the CRC.
func fixCRCs(log []byte) {
	for pos := 0; pos+batch.HeaderSize <= len(log); {
		size := int(int32(binary.BigEndian.Uint32(log[pos+8:]))) + 12
		if size < batch.HeaderSize || pos+size > len(log) || log[pos+16] != 2 {
			return
		}
		sum := crc32.Checksum(log[pos+21:pos+size], crc32.MakeTable(crc32.Castagnoli))
		binary.BigEndian.PutUint32(log[pos+17:], sum)
		pos += size
	}
}

// FuzzInspect: Inspect never panics or loops on any bytes; what it
// accepts is consistent: the copied size lies within the file and only
// zeros follow it, the rebuilt indexes encode, the accepted bytes alone
// pass again, and the indexes Kafka's rule rebuilds from them pass the
// index checks.
func FuzzInspect(f *testing.F) {
	s := build(&testing.T{}, 100, ts(20, 1_000), 40, 100)
	f.Add(s.log, s.offsets, s.times, int64(100), int64(99), int64(100), false, uint16(0))
	f.Add(s.log, s.offsets, s.times, int64(100), int64(99), int64(100), true, uint16(7))
	// The last batch more than 2^31-1 past the base offset, nothing
	// bounding the segment: once accepted, its indexes did not encode.
	over := append([]byte{}, s.log...)
	binary.BigEndian.PutUint64(over[s.starts[len(s.starts)-1]:], uint64(100)+math.MaxInt32+1)
	f.Add(over, s.offsets, s.times, int64(100), int64(-1), int64(100), false, uint16(0))
	// A few real broker segments as seeds.
	n := 0
	filepath.WalkDir(testfixtures.Dir(f), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || n >= 12 {
			return err
		}
		name, ok := kafkalog.ParseFileName(d.Name())
		if !ok || !name.Live || name.Suffix != kafkalog.LogSuffix {
			return nil
		}
		log, err := os.ReadFile(p)
		if err != nil || len(log) > 256<<10 || len(log) == 0 {
			return nil
		}
		stem := p[:len(p)-len(kafkalog.LogSuffix)]
		oi, _ := os.ReadFile(stem + kafkalog.IndexSuffix)
		ti, _ := os.ReadFile(stem + kafkalog.TimeIndexSuffix)
		f.Add(log, oi, ti, name.BaseOffset, int64(-1), int64(4096), false, uint16(0))
		n++
		return nil
	})
	f.Fuzz(func(t *testing.T, log, oi, ti []byte, base, span, interval int64, fix bool, pad uint16) {
		if base < 0 {
			base = -base
		}
		if base < 0 {
			base = 0
		}
		end := int64(-1)
		if span >= 0 && base+span >= base {
			end = base + span
		}
		if fix {
			fixCRCs(log)
		}
		log = append(log, make([]byte, pad%512)...)
		in := Input{Name: "x.log", Base: base, End: end, Log: bytes.NewReader(log), LogSize: int64(len(log)),
			OffsetIndex: oi, TimeIndex: ti, IndexIntervalBytes: interval}
		res, err := Inspect(in)
		if err != nil {
			if errors.Is(err, ErrCorruptSegment) {
				var ce *kafkalog.CorruptionError
				if !errors.As(err, &ce) || ce.Position < 0 || ce.Position > int64(len(log)) {
					t.Fatalf("corrupt without a position in the file: %v", err)
				}
			}
			return
		}
		if res.Size < 0 || res.Size > res.FileSize || res.FileSize != int64(len(log)) {
			t.Fatalf("size %d of file %d (%d bytes)", res.Size, res.FileSize, len(log))
		}
		for i, c := range log[res.Size:] {
			if c != 0 {
				t.Fatalf("non-zero byte at %d after the copied size %d", res.Size+int64(i), res.Size)
			}
		}
		if res.IndexesOK != (res.IndexProblem == "") {
			t.Fatalf("IndexesOK %v, problem %q", res.IndexesOK, res.IndexProblem)
		}
		offs, times, err := res.Rebuilt.Encode(base)
		if err != nil {
			t.Fatalf("rebuilt indexes do not encode: %v", err)
		}
		again := in
		again.Log, again.LogSize = bytes.NewReader(log[:res.Size]), res.Size
		again.OffsetIndex, again.TimeIndex = offs, times
		res2, err := Inspect(again)
		if err != nil {
			t.Fatalf("the accepted %d bytes fail alone: %v", res.Size, err)
		}
		if !res2.IndexesOK {
			t.Fatalf("indexes rebuilt by Kafka's rule fail the index checks: %s", res2.IndexProblem)
		}
		if res2.MaxTimestamp != res.MaxTimestamp || res2.Size != res.Size {
			t.Fatalf("second inspection: %+v, first %+v", res2, res)
		}
	})
}
