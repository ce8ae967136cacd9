package locallog

import (
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/seglog"
)

var bench struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.dir != "" {
		os.RemoveAll(filepath.Dir(bench.dir))
	}
	os.Exit(code)
}

// benchLog writes, once per run, a 64 MiB log with seglog: 16 MiB
// segments of 16-record batches of 1 KiB values.
func benchLog(b *testing.B) string {
	bench.once.Do(func() {
		root, err := os.MkdirTemp("", "locallog-bench")
		if err != nil {
			bench.err = err
			return
		}
		bench.dir = filepath.Join(root, "bench-0")
		cfg := seglog.DefaultConfig()
		cfg.SegmentBytes = 16 << 20
		l, err := seglog.Open(bench.dir, cfg)
		if err != nil {
			bench.err = err
			return
		}
		rng := rand.New(rand.NewSource(1))
		recs := make([]seglog.Record, 16)
		for i := range recs {
			v := make([]byte, 1024)
			rng.Read(v)
			recs[i] = seglog.Record{Value: v, Timestamp: 1_700_000_000_000}
		}
		for total := 0; total < 64<<20; total += 16 * 1024 {
			if _, err := l.Append(recs...); err != nil {
				bench.err = err
				return
			}
		}
		bench.err = l.Close()
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.dir
}

// nextOffset returns the offset after the last entry of data (v2 batches).
func nextOffset(data []byte) int64 {
	var next int64
	for pos := 0; pos+batch.HeaderSize <= len(data); {
		size := int(binary.BigEndian.Uint32(data[pos+8:])) + batch.LogOverhead
		next = int64(binary.BigEndian.Uint64(data[pos:])) + int64(binary.BigEndian.Uint32(data[pos+23:])) + 1
		pos += size
	}
	return next
}

// BenchmarkRead reads the 64 MiB log sequentially in 1 MiB reads, as a
// consumer does, and reports MB/s; compare with BenchmarkReadBaseline.
func BenchmarkRead(b *testing.B) {
	dir := benchLog(b)
	p, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	o, err := p.Offsets()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var total int64
	off := o.LocalLogStartOffset
	for i := 0; i < b.N; i++ {
		data, err := p.Read(off, 1<<20, o.HighWatermark)
		if err != nil {
			b.Fatal(err)
		}
		total += int64(len(data))
		if off = nextOffset(data); off >= o.HighWatermark || len(data) == 0 {
			off = o.LocalLogStartOffset
		}
	}
	b.ReportMetric(float64(total)/1e6/b.Elapsed().Seconds(), "MB/s")
}

// BenchmarkReadBaseline preads the same files in 1 MiB pieces into a new
// buffer each time: the floor for BenchmarkRead.
func BenchmarkReadBaseline(b *testing.B) {
	dir := benchLog(b)
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		b.Fatal(err)
	}
	var files []*os.File
	var sizes []int64
	for _, n := range names {
		f, err := os.Open(n)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		files, sizes = append(files, f), append(sizes, st.Size())
	}
	b.ReportAllocs()
	b.ResetTimer()
	var total int64
	seg, pos := 0, int64(0)
	for i := 0; i < b.N; i++ {
		buf := make([]byte, min(1<<20, sizes[seg]-pos))
		n, _ := files[seg].ReadAt(buf, pos)
		total += int64(n)
		if pos += int64(n); pos >= sizes[seg] {
			seg, pos = (seg+1)%len(files), 0
		}
	}
	b.ReportMetric(float64(total)/1e6/b.Elapsed().Seconds(), "MB/s")
}

// BenchmarkOffsets is the cost of Offsets on a log with nothing new: the
// per-fetch overhead when the caller asks for the offsets on every read.
func BenchmarkOffsets(b *testing.B) {
	p, err := Open(benchLog(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Offsets(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Offsets(); err != nil {
			b.Fatal(err)
		}
	}
}
