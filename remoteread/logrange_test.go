package remoteread

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/remoteread/cache"
	"github.com/tierd/tierd/rsm"
)

// memSource is a LogSource over copies held in memory. It counts the
// bytes asked, remembers the furthest byte asked of each copy, and fails
// the test when a GET asks for bytes past a copy's end.
type memSource struct {
	t     *testing.T
	mu    sync.Mutex
	objs  map[remotelog.SegmentID][]byte
	upTo  map[remotelog.SegmentID]int64
	bytes atomic.Int64
}

func newMemSource(t *testing.T) *memSource {
	return &memSource{t: t, objs: map[remotelog.SegmentID][]byte{}, upTo: map[remotelog.SegmentID]int64{}}
}

// add stores a copy of n random bytes and returns its metadata.
func (m *memSource) add(n int, seed uint64) (remotelog.SegmentMetadata, []byte) {
	data := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	meta := remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "broker", Partition: 0}, ID: remotelog.NewSegmentID(), SizeInBytes: int64(n)}
	m.mu.Lock()
	m.objs[meta.ID] = data
	m.mu.Unlock()
	return meta, data
}

func (m *memSource) FetchLogSegment(ctx context.Context, meta remotelog.SegmentMetadata, start, end int64) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.objs[meta.ID]
	if !ok {
		return nil, fmt.Errorf("get %s.log: %w", meta.ID, rsm.ErrNotFound)
	}
	if end > meta.SizeInBytes || start < 0 || start > end {
		m.t.Errorf("GET of bytes %d-%d of a copy of %d bytes", start, end, meta.SizeInBytes)
	}
	m.upTo[meta.ID] = max(m.upTo[meta.ID], end)
	end = min(end, int64(len(data))) // a bucket cuts a range past the end short
	m.bytes.Add(end - start)
	return io.NopCloser(bytes.NewReader(data[start:end])), nil
}

// furthest returns the furthest byte of copy id asked of the source.
func (m *memSource) furthest(id remotelog.SegmentID) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.upTo[id]
}

// writeRange reads [start, start+n) with WriteLogRange and checks the
// bytes against data.
func writeRange(t *testing.T, srv *Engine, src LogSource, meta remotelog.SegmentMetadata, data []byte, start, n int64) int64 {
	t.Helper()
	var buf bytes.Buffer
	got, err := srv.WriteLogRange(context.Background(), src, meta, start, n, &buf)
	if err != nil {
		t.Fatalf("WriteLogRange(%d, %d): %v", start, n, err)
	}
	end := int64(len(data))
	if n < end-start {
		end = start + n
	}
	if got != int64(buf.Len()) || !bytes.Equal(buf.Bytes(), data[start:end]) {
		t.Fatalf("WriteLogRange(%d, %d) of %d bytes: wrote %d (returned %d), want bytes %d-%d (right: %v)",
			start, n, len(data), buf.Len(), got, start, end, bytes.Equal(buf.Bytes(), data[start:min(end, start+int64(buf.Len()))]))
	}
	return got
}

// logRangeConfig is shortReadersConfig with smaller chunks: several per
// copy, so that ranges cross chunk boundaries.
func logRangeConfig() Config {
	cfg := shortReadersConfig()
	cfg.Cache.ChunkBytes = 64 << 10
	return cfg
}

// Any range of a copy reads byte for byte: inside a chunk, across chunk
// boundaries, at the copy's end, with n past the end (cut there), empty
// at the end; a start past the end is ErrPastEnd and negative arguments
// ErrInvalidArgument. No pin is left.
func TestWriteLogRangeBytes(t *testing.T) {
	e := newEnv(t, logRangeConfig())
	src := newMemSource(t)
	const cb = 64 << 10
	meta, data := src.add(3*cb+cb/2, 1)
	size := int64(len(data))
	for _, r := range [][2]int64{{0, 0}, {0, 1}, {0, size}, {cb - 1, 2}, {cb - 100, cb + 200}, {size - 1, 1}, {size - 1, 10},
		{size - 10, math.MaxInt64}, {100, math.MaxInt64}, {2 * cb, cb}, {size, 5}, {size, 0}} {
		writeRange(t, e.eng, src, meta, data, r[0], r[1])
	}
	rng := rand.New(rand.NewPCG(2, 2))
	for range 200 {
		start := rng.Int64N(size + 1)
		writeRange(t, e.eng, src, meta, data, start, rng.Int64N(2*cb))
	}
	if _, err := e.eng.WriteLogRange(context.Background(), src, meta, size+1, 1, io.Discard); !errors.Is(err, ErrPastEnd) {
		t.Errorf("start past the end: %v, want ErrPastEnd", err)
	}
	for _, bad := range [][2]int64{{-1, 1}, {0, -1}} {
		if _, err := e.eng.WriteLogRange(context.Background(), src, meta, bad[0], bad[1], io.Discard); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("WriteLogRange(%d, %d): %v, want ErrInvalidArgument", bad[0], bad[1], err)
		}
	}
	e.eng.Settle()
	if n := e.eng.Cache().Pinned(); n != 0 {
		t.Fatalf("%d pins left", n)
	}
}

// pluginWindows reads [start, end) of a copy as the broker plugin's
// stream does: windows of first bytes, each twice the last up to most,
// each going on where the last ended; it calls each after every window
// with where the window ended.
func pluginWindows(t *testing.T, srv *Engine, src LogSource, meta remotelog.SegmentMetadata, data []byte, start, end, first, most int64, each func(end int64)) {
	t.Helper()
	for pos, w := start, first; pos < end; w = min(2*w, most) {
		n := writeRange(t, srv, src, meta, data, pos, min(w, end-pos))
		pos += n
		if each != nil {
			each(pos)
		}
	}
}

// A stream in the plugin's windows (1 MiB doubling to 8 MiB, scaled down
// here to 32 KiB doubling to 256 KiB) is a sequential reader: from its
// third window on, bytes past the window it asked for are loaded (read
// ahead), never past the copy's end, and the source is asked for at most
// 1.2 bytes per byte served, whether the stream reads the whole copy or
// stops early. Random reads get no read-ahead.
func TestWriteLogRangePluginWindowsReadAhead(t *testing.T) {
	for _, upTo := range []int64{4 << 20, 300 << 10} { // the whole copy; a stream that stops early
		reg := prometheus.NewRegistry()
		e := newEnv(t, logRangeConfig(), WithRegisterer(reg))
		src := newMemSource(t)
		meta, data := src.add(4<<20, 3)
		windows, ahead := 0, 0
		ratio := fetchedPerServed(t, e, reg, func() {
			pluginWindows(t, e.eng, src, meta, data, 0, upTo, 32<<10, 256<<10, func(end int64) {
				windows++
				if src.furthest(meta.ID) > end {
					ahead++
				}
			})
		})
		t.Logf("plugin windows to %d: %d windows, %d read ahead past their end, %.3f bytes fetched per byte served", upTo, windows, ahead, ratio)
		if ahead < windows-3 {
			t.Errorf("plugin windows to %d: %d of %d windows read ahead past their end, want all from the third on", upTo, ahead, windows)
		}
		if ratio > 1.2 {
			t.Errorf("plugin windows to %d: %.3f bytes fetched per byte served, want <= 1.2", upTo, ratio)
		}
	}
	reg := prometheus.NewRegistry()
	e := newEnv(t, logRangeConfig(), WithRegisterer(reg))
	src := newMemSource(t)
	meta, data := src.add(4<<20, 4)
	rng := rand.New(rand.NewPCG(4, 4))
	ratio := fetchedPerServed(t, e, reg, func() {
		for range 40 {
			writeRange(t, e.eng, src, meta, data, rng.Int64N(4<<20), 32<<10)
		}
	})
	if n := readtest.MetricValue(t, reg, "tierd_cache_prefetches_total"); n != 0 || ratio > 2 {
		t.Errorf("40 random reads: %v prefetches, %.3f bytes fetched per byte served; want none and their own bytes", n, ratio)
	}
}

// A broker's consumer reads a copy in streams of one window each, every
// new stream starting at an offset index entry a little before where the
// previous one ended: they form one sequential reader, read ahead for,
// asking the source for at most 1.2 bytes per byte served.
func TestWriteLogRangeBrokerStreams(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, logRangeConfig(), WithRegisterer(reg))
	src := newMemSource(t)
	meta, data := src.add(2<<20, 5)
	rng := rand.New(rand.NewPCG(5, 5))
	streams, ahead := 0, 0
	ratio := fetchedPerServed(t, e, reg, func() {
		for pos := int64(0); pos < int64(len(data)); {
			end := pos + writeRange(t, e.eng, src, meta, data, pos, 32<<10)
			streams++
			if src.furthest(meta.ID) > end {
				ahead++
			}
			if end >= int64(len(data)) {
				break
			}
			pos = max(pos+1, end-rng.Int64N(6000)) // the last whole batch's end, then the index entry at or below it
		}
	})
	t.Logf("%d broker streams, %d read ahead past their end, %.3f bytes fetched per byte served", streams, ahead, ratio)
	if ahead < streams-3 || ratio > 1.2 {
		t.Fatalf("%d broker streams: %d read ahead past their end, %.3f bytes fetched per byte served; want all from the third on, <= 1.2", streams, ahead, ratio)
	}
}

// Readers at once, each streaming its own copy and, on another copy,
// each its own eighth of it: every byte right, at most 1.2 bytes fetched
// per byte served, no pin left.
func TestWriteLogRangeConcurrentReaders(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, logRangeConfig(), WithRegisterer(reg))
	src := newMemSource(t)
	type cp struct {
		meta remotelog.SegmentMetadata
		data []byte
	}
	var own []cp
	for i := range 8 {
		m, d := src.add(1<<20, uint64(10+i))
		own = append(own, cp{m, d})
	}
	shared, sharedData := src.add(2<<20, 20)
	ratio := fetchedPerServed(t, e, reg, func() {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				pluginWindows(t, e.eng, src, own[i].meta, own[i].data, 0, 1<<20, 32<<10, 256<<10, nil)
			}()
			go func() {
				defer wg.Done()
				from := int64(i) * (2 << 20) / 8
				pluginWindows(t, e.eng, src, shared, sharedData, from, from+(2<<20)/8, 32<<10, 256<<10, nil)
			}()
		}
		wg.Wait()
	})
	t.Logf("16 concurrent readers: %.3f bytes fetched per byte served", ratio)
	if ratio > 1.2 {
		t.Errorf("16 concurrent readers: %.3f bytes fetched per byte served, want <= 1.2", ratio)
	}
	if n := e.eng.Cache().Pinned(); n != 0 {
		t.Fatalf("%d pins left", n)
	}
}

// errWriter fails every write after the first.
type errWriter struct{ n int }

var errWriteFailed = errors.New("client went away")

func (w *errWriter) Write(p []byte) (int, error) {
	if w.n++; w.n > 1 {
		return 0, errWriteFailed
	}
	return len(p), nil
}

// A missing object is rsm.ErrNotFound, a shorter one cache.ErrShortObject,
// a cancelled caller ctx's error, a failing writer its error with the
// bytes written before it; none leaves a pin.
func TestWriteLogRangeErrors(t *testing.T) {
	e := newEnv(t, logRangeConfig())
	src := newMemSource(t)
	missing := remotelog.SegmentMetadata{ID: remotelog.NewSegmentID(), SizeInBytes: 1000}
	if n, err := e.eng.WriteLogRange(context.Background(), src, missing, 0, 100, io.Discard); !errors.Is(err, rsm.ErrNotFound) || n != 0 {
		t.Errorf("missing object: %d bytes, %v; want rsm.ErrNotFound", n, err)
	}
	meta, _ := src.add(1000, 6)
	short := meta
	short.ID, short.SizeInBytes = remotelog.NewSegmentID(), 2000
	src.mu.Lock()
	src.objs[short.ID] = src.objs[meta.ID]
	src.mu.Unlock()
	if _, err := e.eng.WriteLogRange(context.Background(), src, short, 500, 1500, io.Discard); !errors.Is(err, cache.ErrShortObject) {
		t.Errorf("object shorter than its size: %v; want cache.ErrShortObject", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.eng.WriteLogRange(ctx, src, meta, 0, 100, io.Discard); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	big, _ := src.add(300<<10, 7)
	n, err := e.eng.WriteLogRange(context.Background(), src, big, 0, 300<<10, &errWriter{})
	if !errors.Is(err, errWriteFailed) || n == 0 || n >= 300<<10 {
		t.Errorf("failing writer: %d bytes, %v; want its error after the first write", n, err)
	}
	e.eng.Settle()
	if p := e.eng.Cache().Pinned(); p != 0 {
		t.Fatalf("%d pins left", p)
	}
}
