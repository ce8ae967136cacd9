package listener

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Frame errors; each closes the connection under its reason.
var (
	errFrameTooLarge = errors.New("listener: request frame above socket.request.max.bytes")
	errNegativeSize  = errors.New("listener: negative request frame size")
	errIdle          = errors.New("listener: connection idle")
	errStalled       = errors.New("listener: client stalled inside a request frame")
	errClientClosed  = errors.New("listener: client closed the connection")
	errMalformed     = errors.New("listener: malformed request")
)

const (
	// frameChunk is the first allocation for a frame body, bytes; the
	// buffer then doubles as bytes arrive, so memory follows what the
	// client has sent, never the size it claims.
	frameChunk = 64 << 10
	// keepBuffer is the largest buffer a connection keeps between
	// requests, bytes; a larger one is dropped after its request.
	keepBuffer = 1 << 20
)

// frameReader reads Kafka request frames: a 4-byte big-endian size, then
// that many bytes. It never allocates more than twice the bytes received
// (plus frameChunk), and every read must make progress within idle.
type frameReader struct {
	r           io.Reader
	setDeadline func(time.Time) error // nil: no deadlines (tests)
	idle        time.Duration
	// until, when set, bounds every deadline, however much arrives: the
	// end of the time a client has to log in (saslFrameLimits).
	until time.Time
	max   int32
	buf   []byte
}

// next returns the next frame's body, valid until the following call.
// Errors: errIdle (nothing arrived within idle), errStalled (a frame begun
// and not continued within idle), errClientClosed, errNegativeSize,
// errFrameTooLarge (the size is checked before anything is allocated for
// the body), or another read error.
func (f *frameReader) next() ([]byte, error) {
	if cap(f.buf) > keepBuffer {
		f.buf = nil
	}
	var size [4]byte
	n, err := f.fill(size[:])
	if err != nil {
		if n == 0 {
			switch {
			case isTimeout(err):
				return nil, errIdle
			case isClosed(err):
				return nil, errClientClosed
			}
		}
		return nil, f.midFrame(err)
	}
	sz := int32(binary.BigEndian.Uint32(size[:]))
	switch {
	case sz < 0:
		return nil, fmt.Errorf("%w: %d", errNegativeSize, sz)
	case sz > f.max:
		return nil, fmt.Errorf("%w: %d > %d", errFrameTooLarge, sz, f.max)
	}
	body := f.buf[:0]
	for len(body) < int(sz) {
		want := min(int(sz), max(frameChunk, 2*len(body)))
		if cap(body) < want {
			nb := make([]byte, len(body), want)
			copy(nb, body)
			body = nb
		}
		got, err := f.fill(body[len(body):want])
		body = body[:len(body)+got]
		if err != nil {
			f.buf = body
			return nil, f.midFrame(err)
		}
	}
	f.buf = body
	return body, nil
}

// fill reads len(p) bytes, refreshing the deadline after each read that
// made progress; it returns how many it read.
func (f *frameReader) fill(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if f.setDeadline != nil {
			d := time.Now().Add(f.idle)
			if !f.until.IsZero() && f.until.Before(d) {
				d = f.until
			}
			if err := f.setDeadline(d); err != nil {
				return n, err
			}
		}
		m, err := f.r.Read(p[n:])
		n += m
		if err != nil {
			if n == len(p) && errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
	}
	return n, nil
}

func (f *frameReader) midFrame(err error) error {
	switch {
	case isTimeout(err):
		return errStalled
	case isClosed(err):
		return fmt.Errorf("%w inside a frame", errClientClosed)
	}
	return err
}

var errConnReset = syscall.ECONNRESET

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, errConnReset)
}

// header is a request header (v1 or v2: api key, version, correlation id,
// client id; v2 adds tagged fields, which are skipped).
type header struct {
	key      int16
	version  int16
	corr     int32
	clientID string
}

// parseHeader splits a frame into its header and body. The header version
// follows the request: v2 for flexible versions, else v1 (ApiVersions at
// an unsupported version uses v2 from v3 up, as Kafka reads it). Header v0
// (ControlledShutdown v0, which has no client id) is never served, so it
// is read as v1 and then refused by its key. kreq is nil for an API key
// kmsg does not know. Errors wrap errMalformed.
func parseHeader(frame []byte) (h header, kreq kmsg.Request, body []byte, err error) {
	r := kbin.Reader{Src: frame}
	h.key, h.version, h.corr = r.Int16(), r.Int16(), r.Int32()
	cid := r.NullableString()
	if !r.Ok() {
		return h, nil, nil, fmt.Errorf("%w: short header (%d bytes)", errMalformed, len(frame))
	}
	if cid != nil {
		h.clientID = *cid
	}
	kreq = kmsg.RequestForKey(h.key)
	if kreq == nil {
		return h, nil, nil, nil
	}
	kreq.SetVersion(h.version)
	if kreq.IsFlexible() {
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return h, nil, nil, fmt.Errorf("%w: header tagged fields", errMalformed)
		}
	}
	return h, kreq, r.Src, nil
}
