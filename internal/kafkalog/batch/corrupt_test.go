package batch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// threeBatches returns a log of three v2 batches and their start positions.
func threeBatches(t testing.TB) ([]byte, []int64) {
	var log []byte
	var pos []int64
	for i := int64(0); i < 3; i++ {
		pos = append(pos, int64(len(log)))
		var err error
		log, err = batch.AppendBatch(log, batch.NewParams(i*2, 0), []batch.Record{
			{Timestamp: 100 + i, Value: []byte("first")}, {Timestamp: 101 + i, Value: []byte("second")}}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	return log, pos
}

func scanAll(data []byte, verify bool) (batches []batch.Batch, crcOK []bool, validEnd int64, err error) {
	s := batch.NewScanner(bytes.NewReader(data), int64(len(data)), batch.ScanOptions{VerifyCRC: verify})
	for s.Next() {
		batches = append(batches, s.Batch())
		crcOK = append(crcOK, s.CRCValid())
	}
	return batches, crcOK, s.ValidEnd(), s.Err()
}

func corruptAt(t *testing.T, err error, pos int64, reason string) {
	t.Helper()
	var ce *kafkalog.CorruptionError
	if !errors.Is(err, kafkalog.ErrCorrupt) || !errors.As(err, &ce) {
		t.Fatalf("want a corruption error, got %v", err)
	}
	if ce.Position != pos || !strings.Contains(ce.Reason, reason) {
		t.Fatalf("corruption at %d (%q), want %d containing %q", ce.Position, ce.Reason, pos, reason)
	}
}

func TestScannerCorruption(t *testing.T) {
	log, pos := threeBatches(t)
	t.Run("clean", func(t *testing.T) {
		bs, ok, end, err := scanAll(log, true)
		if err != nil || len(bs) != 3 || end != int64(len(log)) || !ok[0] || !ok[1] || !ok[2] {
			t.Fatalf("got %d batches end %d err %v crc %v", len(bs), end, err, ok)
		}
	})
	t.Run("torn tail", func(t *testing.T) {
		for cut := pos[2] + 1; cut < int64(len(log)); cut += 7 {
			bs, _, end, err := scanAll(log[:cut], false)
			if len(bs) != 2 || end != pos[2] {
				t.Fatalf("cut at %d: %d batches, valid end %d", cut, len(bs), end)
			}
			corruptAt(t, err, pos[2], "truncated")
		}
	})
	t.Run("flipped payload byte fails only that CRC", func(t *testing.T) {
		bad := bytes.Clone(log)
		bad[pos[1]+batch.HeaderSize+3] ^= 0x40
		bs, ok, _, err := scanAll(bad, true)
		if err != nil || len(bs) != 3 {
			t.Fatalf("%d batches, err %v", len(bs), err)
		}
		if !ok[0] || ok[1] || !ok[2] {
			t.Fatalf("crc results %v, want only the second bad", ok)
		}
	})
	t.Run("unknown magic", func(t *testing.T) {
		bad := bytes.Clone(log)
		bad[pos[1]+16] = 7
		bs, _, _, err := scanAll(bad, false)
		if len(bs) != 1 {
			t.Fatalf("%d batches", len(bs))
		}
		corruptAt(t, err, pos[1]+16, "unknown magic 7")
	})
	t.Run("length below minimum", func(t *testing.T) {
		bad := bytes.Clone(log)
		binary.BigEndian.PutUint32(bad[pos[2]+8:], 12)
		_, _, _, err := scanAll(bad, false)
		corruptAt(t, err, pos[2]+8, "below minimum")
	})
	t.Run("huge length does not allocate", func(t *testing.T) {
		bad := bytes.Clone(log)
		binary.BigEndian.PutUint32(bad[pos[0]+8:], 0x7ffffff0)
		allocs := testing.AllocsPerRun(5, func() { scanAll(bad, true) })
		_, _, _, err := scanAll(bad, true)
		corruptAt(t, err, 0, "truncated entry")
		if allocs > 20 {
			t.Fatalf("%v allocations", allocs)
		}
	})
	t.Run("zero padding after the log", func(t *testing.T) {
		padded := append(bytes.Clone(log), make([]byte, 100)...)
		bs, _, end, err := scanAll(padded, false)
		if len(bs) != 3 || end != int64(len(log)) {
			t.Fatalf("%d batches end %d", len(bs), end)
		}
		corruptAt(t, err, int64(len(log))+8, "below minimum") // magic 0 with length 0
	})
	t.Run("negative count", func(t *testing.T) {
		bad := bytes.Clone(log)
		binary.BigEndian.PutUint32(bad[pos[0]+57:], 0xffffffff)
		_, _, _, err := scanAll(bad, false)
		corruptAt(t, err, 57, "negative record count")
	})
}

func TestRecordsCorruption(t *testing.T) {
	log, pos := threeBatches(t)
	one := bytes.Clone(log[pos[0]:pos[1]])
	// A record length that runs past the batch, with a recomputed CRC so
	// only the record decoder can notice.
	bad := bytes.Clone(one)
	bad[batch.HeaderSize] = 0x7e // zigzag 63: longer than the record
	if _, err := batch.Records(bad, nil); !errors.Is(err, kafkalog.ErrCorrupt) {
		t.Fatalf("bad record length: %v", err)
	}
	// A count larger than the records present.
	bad = bytes.Clone(one)
	binary.BigEndian.PutUint32(bad[57:], 1000)
	if _, err := batch.Records(bad, nil); !errors.Is(err, kafkalog.ErrCorrupt) {
		t.Fatalf("count too large: %v", err)
	}
	// A count smaller than the records present leaves trailing bytes.
	bad = bytes.Clone(one)
	binary.BigEndian.PutUint32(bad[57:], 1)
	if _, err := batch.Records(bad, nil); !errors.Is(err, kafkalog.ErrCorrupt) {
		t.Fatalf("count too small: %v", err)
	}
	// Garbage in a gzip payload is an error, not a panic.
	p := batch.NewParams(0, 0)
	p.Codec = batch.CodecGzip
	gz, err := batch.AppendBatch(nil, p, []batch.Record{{Timestamp: 1, Value: []byte("v")}}, batch.Stdlib)
	if err != nil {
		t.Fatal(err)
	}
	gz[len(gz)-3] ^= 0xff
	if _, err := batch.Records(gz, codec.Kafka); err == nil {
		t.Fatal("corrupt gzip payload decoded")
	}
}

// TestDecompressionLimit: every codec stops at the caller's limit, and the
// limit for a small payload is small.
func TestDecompressionLimit(t *testing.T) {
	zeros := make([]byte, 8<<20)
	for _, c := range []batch.Codec{batch.CodecGzip, batch.CodecZstd, batch.CodecLZ4, batch.CodecSnappy} {
		comp, err := codec.Kafka.Compress(c, nil, zeros)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := codec.Kafka.Decompress(c, comp, len(zeros)-1); err == nil {
			t.Errorf("%s: decompressed past a limit of %d bytes", c, len(zeros)-1)
		}
		out, err := codec.Kafka.Decompress(c, comp, len(zeros))
		if err != nil || !bytes.Equal(out, zeros) {
			t.Errorf("%s: at the limit: %d bytes, %v", c, len(out), err)
		}
	}
	for _, tc := range []struct{ src, want int }{{10, 16 << 20}, {1 << 20, 256 << 20}, {256 << 10, 64 << 20}} {
		if got := batch.DecompressLimit(tc.src); got != tc.want {
			t.Errorf("DecompressLimit(%d) = %d, want %d", tc.src, got, tc.want)
		}
	}
}

// FuzzScan feeds arbitrary bytes to the scanner and the record decoder:
// they must return errors, never panic, and never report an entry outside
// the input.
func FuzzScan(f *testing.F) {
	log, _ := threeBatches(f)
	f.Add(log)
	f.Add(log[:70])
	for _, c := range []batch.Codec{batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		p := batch.NewParams(5, 1)
		p.Codec = c
		b, err := batch.AppendBatch(nil, p, []batch.Record{{Timestamp: 9, Key: []byte("k"), Value: []byte("value value value")}}, codec.Kafka)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	addFixtureSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		s := batch.NewScanner(bytes.NewReader(data), int64(len(data)), batch.ScanOptions{VerifyCRC: true, BufferSize: 64})
		last := int64(-1)
		c := batch.NewChecker(0, -1)
		for s.Next() {
			b := s.Batch()
			if err := c.Check(b); err != nil && !errors.Is(err, kafkalog.ErrCorrupt) {
				t.Fatalf("checker: %v", err)
			}
			if err, want := s.CheckRecords(), b.CheckRecords(data[b.Position:b.End()]); (err == nil) != (want == nil) {
				t.Fatalf("record checks disagree at %d: %v vs %v", b.Position, err, want)
			}
			if b.Position <= last || b.End() > int64(len(data)) || b.Size < batch.LogOverhead+14 {
				t.Fatalf("entry %+v outside input of %d bytes (previous at %d)", b, len(data), last)
			}
			last = b.Position
			raw := data[b.Position:b.End()]
			if batch.CheckCRC(raw) != s.CRCValid() {
				t.Fatalf("CRC results disagree at %d", b.Position)
			}
			_, _ = batch.Records(raw, codec.Kafka)
		}
		if s.Err() == nil && s.ValidEnd() != int64(len(data)) {
			t.Fatalf("clean end at %d of %d", s.ValidEnd(), len(data))
		}
	})
}

// FuzzRoundTrip: any records we write read back identically.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("k"), []byte("v"), int64(1700000000000), int64(5), "hk", []byte("hv"), uint8(0))
	f.Add([]byte(nil), []byte(nil), int64(-1), int64(0), "", []byte(nil), uint8(4))
	f.Fuzz(func(t *testing.T, key, value []byte, ts, base int64, hk string, hv []byte, c uint8) {
		if base < 0 {
			base = -base / 2
		}
		codecID := batch.Codec(c % 5)
		p := batch.NewParams(base, 3)
		p.Codec = codecID
		in := []batch.Record{
			{Timestamp: ts, Key: key, Value: value, Headers: []batch.RecordHeader{{Key: hk, Value: hv}}},
			{Timestamp: ts / 2, Value: value},
		}
		raw, err := batch.AppendBatch(nil, p, in, codec.Kafka)
		if err != nil {
			t.Fatal(err)
		}
		out, err := batch.Records(raw, codec.Kafka)
		if err != nil {
			t.Fatal(err)
		}
		for i := range in {
			if out[i].Offset != base+int64(i) || out[i].Timestamp != in[i].Timestamp ||
				!bytes.Equal(out[i].Key, in[i].Key) || (out[i].Key == nil) != (in[i].Key == nil) ||
				!bytes.Equal(out[i].Value, in[i].Value) || (out[i].Value == nil) != (in[i].Value == nil) {
				t.Fatalf("record %d: in %+v out %+v", i, in[i], out[i])
			}
		}
		if h := out[0].Headers; len(h) != 1 || h[0].Key != hk || !bytes.Equal(h[0].Value, hv) || (h[0].Value == nil) != (hv == nil) {
			t.Fatalf("headers %+v", h)
		}
	})
}

// addFixtureSeeds seeds a fuzzer with the first 4 KiB of each real log when
// the fixtures are present (a fuzz seed is optional, so no skip or failure).
func addFixtureSeeds(f *testing.F) {
	dir := os.Getenv("TIERD_FIXTURES")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "..", "shared", "fixtures", "real")
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".log") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err == nil && len(data) > 0 {
			f.Add(data[:min(len(data), 4096)])
		}
		return nil
	})
}
