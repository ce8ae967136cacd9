package chunked

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// smallChunks returns a Codec of MinChunkBytes chunks with compression
// and encryption as asked, and the Sealer of copy "t-0/seg" when
// encrypting (nil otherwise).
func smallChunks(t *testing.T, compress, encrypt bool) (*Codec, *Sealer) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ChunkBytes = MinChunkBytes
	cfg.Compression, cfg.Encryption = compress, encrypt
	c, err := NewCodec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !encrypt {
		return c, nil
	}
	return c, testSealer(t, "t-0/seg")
}

// A read ahead returns the bytes of the chunks before a damaged one, then
// the damaged chunk's error, as the reader in turn does.
func TestReadAheadStopsAtDamage(t *testing.T) {
	c, s := smallChunks(t, true, true)
	data := textLike(8 * MinChunkBytes)
	stored, l := encodeAll(t, c, s, data)
	off := int64(0)
	for _, e := range l.Chunks[:5] {
		off += e.StoredLen
	}
	stored[off+40] ^= 1 // in chunk 5
	ra := NewReadAhead(io.NopCloser(bytes.NewReader(stored)), c, l, s, ".log", 0, int64(len(data)))
	defer ra.Close()
	got, err := io.ReadAll(ra)
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("read: %v, want ErrDamaged", err)
	}
	if want := data[:5*MinChunkBytes]; !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes before the damage, want the %d of chunks 0-4", len(got), len(want))
	}
	if n, err := ra.Read(make([]byte, 10)); n != 0 || !errors.Is(err, ErrDamaged) {
		t.Fatalf("read after the error: %d, %v", n, err)
	}
}

// A source that ends early is io.ErrUnexpectedEOF, after the whole chunks
// it held.
func TestReadAheadShortSource(t *testing.T) {
	c, s := smallChunks(t, false, true)
	data := randomBytes(4 * MinChunkBytes)
	stored, l := encodeAll(t, c, s, data)
	cut := l.Chunks[0].StoredLen + l.Chunks[1].StoredLen + 7
	ra := NewReadAhead(io.NopCloser(bytes.NewReader(stored[:cut])), c, l, s, ".log", 0, int64(len(data)))
	defer ra.Close()
	got, err := io.ReadAll(ra)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(got, data[:2*MinChunkBytes]) {
		t.Fatalf("read %d bytes, %v; want chunks 0-1 and io.ErrUnexpectedEOF", len(got), err)
	}
}

// blockingBody is a body whose bytes stop coming: its Read waits until
// Close, as a stalled HTTP body's does.
type blockingBody struct {
	r      io.Reader
	closed chan struct{}
}

func (b *blockingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 || err != io.EOF {
		return n, err
	}
	<-b.closed
	return 0, errors.New("read on closed body")
}

func (b *blockingBody) Close() error { close(b.closed); return nil }

// Close, while a Read waits for bytes that do not come, ends that Read
// with an error, and leaves no goroutine running.
func TestReadAheadCloseWhileWaiting(t *testing.T) {
	c, _ := smallChunks(t, true, false)
	data := textLike(6 * MinChunkBytes)
	stored, l := encodeAll(t, c, nil, data)
	before := runtime.NumGoroutine()
	body := &blockingBody{r: bytes.NewReader(stored[:l.Chunks[0].StoredLen+l.Chunks[1].StoredLen+1]), closed: make(chan struct{})}
	ra := NewReadAhead(body, c, l, nil, ".log", 0, int64(len(data)))
	buf := make([]byte, 2*MinChunkBytes)
	if _, err := io.ReadFull(ra, buf); err != nil || !bytes.Equal(buf, data[:len(buf)]) {
		t.Fatalf("first two chunks: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := ra.Read(buf); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("read of a stalled chunk returned %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := ra.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("read after Close returned no error")
	}
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Close, %d before the read", n, before)
	}
}

// Closing a read ahead that was never read stops its reads and decodes.
func TestReadAheadCloseUnread(t *testing.T) {
	c, _ := smallChunks(t, true, false)
	data := textLike(20 * MinChunkBytes)
	stored, l := encodeAll(t, c, nil, data)
	for range 50 {
		ra := NewReadAhead(io.NopCloser(bytes.NewReader(stored)), c, l, nil, ".log", 0, int64(len(data)))
		if err := ra.Close(); err != nil {
			t.Fatal(err)
		}
		if n, err := ra.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("read after Close: %d, %v", n, err)
		}
	}
}

// panicky is a body whose Read panics after left bytes, as a bucket
// client's bug might.
type panicky struct {
	r    io.Reader
	left int
}

func (p *panicky) Read(b []byte) (int, error) {
	if p.left <= 0 {
		panic("bucket client bug")
	}
	n, err := p.r.Read(b[:min(len(b), p.left)])
	p.left -= n
	return n, err
}

// A panic of the body's Read, or of a chunk's decode, on the goroutines
// that read ahead is that chunk's error for the caller, after the whole
// chunks before it; the process goes on.
func TestReadAheadPanicIsAnError(t *testing.T) {
	c, _ := smallChunks(t, true, false)
	data := textLike(6 * MinChunkBytes)
	stored, l := encodeAll(t, c, nil, data)
	cut := int(l.Chunks[0].StoredLen+l.Chunks[1].StoredLen) + 10
	ra := NewReadAhead(io.NopCloser(&panicky{r: bytes.NewReader(stored), left: cut}), c, l, nil, ".log", 0, int64(len(data)))
	got, err := io.ReadAll(ra)
	ra.Close()
	if err == nil || !strings.Contains(err.Error(), "chunk 2: read panicked: bucket client bug") || !bytes.Equal(got, data[:2*MinChunkBytes]) {
		t.Fatalf("read over a panicking body: %d bytes, %v", len(got), err)
	}
	// A Codec without its decoder (a bug) panics decoding a compressed chunk.
	ra = NewReadAhead(io.NopCloser(bytes.NewReader(stored)), &Codec{cfg: c.cfg}, l, nil, ".log", 0, int64(len(data)))
	got, err = io.ReadAll(ra)
	ra.Close()
	if err == nil || !strings.Contains(err.Error(), "chunk 0: decode panicked") || len(got) != 0 {
		t.Fatalf("read with a panicking decode: %d bytes, %v", len(got), err)
	}
}

// Buffers are recycled per size class: a small buffer given back does
// not make every later chunk-sized one a new allocation.
func TestBufClasses(t *testing.T) {
	putBuf(getBuf(1000)) // a sample's, or a compressed chunk's stored bytes
	putBuf(getBuf(MinChunkBytes + sealOverhead))
	allocs := testing.AllocsPerRun(100, func() {
		b := getBuf(MinChunkBytes + sealOverhead)
		if cap(b) < MinChunkBytes+sealOverhead {
			t.Fatalf("buffer of %d bytes' room for %d", cap(b), MinChunkBytes+sealOverhead)
		}
		putBuf(b)
	})
	if allocs > 1 {
		t.Fatalf("%.0f allocations a get and put of a chunk-sized buffer, want reuse", allocs)
	}
}
