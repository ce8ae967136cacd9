package chunked

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
)

// aheadBytes bounds the original bytes a ReadAhead decodes ahead of its
// caller (with the stored bytes of the same chunks: about twice this in
// buffers), and so how many chunks are in flight: 4 at the default 256
// KiB, 1 (beside the one being read) from 1 MiB chunks up.
const aheadBytes = 1 << 20

// errReadAheadClosed ends the reads of a ReadAhead that was closed.
var errReadAheadClosed = errors.New("chunked: read of a closed range")

// NewReadAhead is NewReader that works ahead of its caller: one goroutine
// reads the stored chunks from src as they arrive, and each chunk is
// decoded on a goroutine of its own, so that decoding chunk i overlaps
// the transfer of chunk i+1 and the caller's use of chunk i-1. Up to
// aheadBytes of chunks are in flight, at most min(4, GOMAXPROCS) decodes
// at once (one from 1 MiB chunks up). Bytes and errors are NewReader's,
// in order: the bytes before a damaged chunk, then its error. Close
// closes src and returns once no goroutine of the reader runs; it may be
// called while a Read waits (src's Close must then end src's reads:
// every bucket's GetRange body does, rsmtest.ExerciseCloseStalledBody).
// A range within one chunk is read as NewReader reads it.
func NewReadAhead(src io.ReadCloser, c *Codec, l *Layout, s *Sealer, suffix string, start, end int64) io.ReadCloser {
	r := NewReader(src, c, l, s, suffix, start, end)
	if r.err != nil || r.next == r.last {
		return struct {
			io.Reader
			io.Closer
		}{r, src}
	}
	depth := max(1, min(4, int(aheadBytes/l.ChunkBytes)))
	a := &aheadReader{src: src, skip: r.skip, left: r.left,
		q: make(chan *decoded, depth), stop: make(chan struct{})}
	a.wg.Add(1)
	go a.produce(r, max(1, min(depth, runtime.GOMAXPROCS(0))))
	return a
}

// aheadReader is NewReadAhead's reader.
type aheadReader struct {
	src  io.ReadCloser
	q    chan *decoded // in chunk order; closed when produce returns
	stop chan struct{} // closed by Close
	wg   sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool

	// The caller's side (Read).
	skip  int64 // original bytes to drop from the next chunk
	left  int64 // original bytes still to return
	cur   *decoded
	plain []byte // cur's undelivered bytes
	err   error
}

// decoded is one chunk on its way: ready closes when out or err is set.
type decoded struct {
	ready chan struct{}
	out   []byte
	err   error
}

// produce reads chunks r.next..r.last from the source and starts their
// decodes, queueing each chunk before its bytes are read (so the queue's
// depth bounds the chunks in flight).
//
// A panic of the source's Read (a bucket client's bug) or of a decode
// is the chunk's error, as a panic of the caller's own Read would be
// where its caller recovers (the chunk cache's loads do): it does not
// take the process down from a goroutine no caller can recover.
func (a *aheadReader) produce(r *Reader, workers int) {
	defer a.wg.Done()
	defer close(a.q)
	var d *decoded // queued, not yet handed to a decode
	i := r.next
	defer func() {
		if p := recover(); p != nil && d != nil {
			d.fail(fmt.Errorf("chunked: %s chunk %d: read panicked: %v", r.suffix, i, p))
		}
	}()
	sem := make(chan struct{}, workers)
	for ; i <= r.last; i++ {
		d = &decoded{ready: make(chan struct{})}
		select {
		case a.q <- d:
		case <-a.stop:
			return
		}
		e := r.l.Chunks[i]
		stored := getBuf(int(e.StoredLen))[:e.StoredLen]
		if _, err := io.ReadFull(r.src, stored); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			d.fail(fmt.Errorf("chunked: %s chunk %d: %w", r.suffix, i, err))
			return
		}
		select {
		case sem <- struct{}{}:
		case <-a.stop:
			d.fail(errReadAheadClosed)
			return
		}
		a.wg.Add(1)
		go a.decode(r, d, stored, e, i, sem)
		d = nil
	}
}

// decode decodes chunk i's stored bytes into d, then frees its place in
// sem and says d is ready.
func (a *aheadReader) decode(r *Reader, d *decoded, stored []byte, e Chunk, i int, sem chan struct{}) {
	defer a.wg.Done()
	defer close(d.ready)
	defer func() { <-sem }()
	defer func() {
		if p := recover(); p != nil {
			d.out, d.err = nil, fmt.Errorf("chunked: %s chunk %d: decode panicked: %v", r.suffix, i, p)
		}
	}()
	want := r.l.OriginalLen(i)
	d.out, d.err = r.c.Decode(getBuf(int(want)), stored, e, r.s, r.suffix, i, want)
	putBuf(stored)
}

func (d *decoded) fail(err error) {
	d.err = err
	close(d.ready)
}

// Read implements io.Reader.
func (a *aheadReader) Read(p []byte) (int, error) {
	if a.closed.Load() {
		return 0, errReadAheadClosed
	}
	for len(a.plain) == 0 {
		if a.err != nil {
			return 0, a.err
		}
		if a.cur != nil {
			putBuf(a.cur.out)
			a.cur = nil
		}
		if a.left == 0 {
			a.err = io.EOF
			continue
		}
		d, ok := <-a.q
		if !ok {
			// produce stopped without a chunk's error: only Close does that.
			a.err = errReadAheadClosed
			continue
		}
		<-d.ready
		if d.err != nil {
			a.err = d.err
			continue
		}
		out := d.out[a.skip:]
		a.skip = 0
		if int64(len(out)) > a.left {
			out = out[:a.left]
		}
		a.left -= int64(len(out))
		a.cur, a.plain = d, out
	}
	n := copy(p, a.plain)
	a.plain = a.plain[n:]
	return n, nil
}

// Close stops the reads ahead, closes the source and waits for the
// reader's goroutines; it returns src's Close error.
func (a *aheadReader) Close() error {
	a.closeOnce.Do(func() {
		a.closed.Store(true)
		close(a.stop)
		a.closeErr = a.src.Close()
		a.wg.Wait()
	})
	return a.closeErr
}
