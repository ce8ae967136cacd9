package grpcapi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tierd/tierd/proto/tierdpb"
)

// clientCodec is the client's gRPC codec: the proto codec, except that a
// FetchResponse is decoded with its records copied once, from the
// transport's buffers straight into their final place, instead of the
// proto codec's two copies (the message gathered into one buffer, then
// the records copied out of it). Into a *tierdpb.FetchResponse, records
// get a buffer of their own (the caller's, as with the proto codec); into
// a *recordsInto, they are appended to its buffer.
type clientCodec struct{ proto encoding.CodecV2 }

func newClientCodec() clientCodec { return clientCodec{proto: encoding.GetCodecV2("proto")} }

func (c clientCodec) Name() string { return "proto" }

func (c clientCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c clientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *tierdpb.FetchResponse:
		proto.Reset(m)
		err := decodeFetchResponse(data, m, func(n int) ([]byte, error) {
			m.Records = make([]byte, n)
			return m.Records, nil
		})
		if errors.Is(err, errFallback) {
			return c.proto.Unmarshal(data, v)
		}
		return err
	case *recordsInto:
		m.resp.Reset()
		l := len(m.buf)
		err := decodeFetchResponse(data, &m.resp, func(n int) ([]byte, error) {
			if len(m.buf) > l {
				return nil, errors.New("fetch: bad FetchResponse: records twice")
			}
			return m.grow(n), nil
		})
		if errors.Is(err, errFallback) {
			m.buf = m.buf[:l]
			if err = c.proto.Unmarshal(data, &m.resp); err == nil {
				copy(m.grow(len(m.resp.Records)), m.resp.Records)
				m.resp.Records = nil
			}
		}
		if err != nil {
			m.buf = m.buf[:l] // the message's records, whole or none
		}
		return err
	}
	return c.proto.Unmarshal(data, v)
}

// recordsInto receives a FetchResponse (or a FetchStream part) whose
// records are appended to buf: resp has the other fields.
type recordsInto struct {
	buf   []byte
	resp  tierdpb.FetchResponse
	alloc func(capacity int) []byte // a buffer of len 0; nil: make
	hint  int                       // the capacity to start with, when larger than the first records
}

// grow returns the next n bytes of buf, growing it (alloc'ed buffers are
// not copied into a new one unless they are too small).
func (r *recordsInto) grow(n int) []byte {
	l := len(r.buf)
	if cap(r.buf)-l < n {
		c := max(l+n, 2*cap(r.buf), r.hint)
		var nb []byte
		if r.alloc != nil {
			nb = r.alloc(c)
		} else {
			nb = make([]byte, 0, c)
		}
		r.buf = append(nb, r.buf...)
	}
	r.buf = r.buf[:l+n]
	return r.buf[l:]
}

// errFallback: a FetchResponse with a field this decoder does not know
// (from a newer server); the proto codec decodes it.
var errFallback = errors.New("fetch: unknown FetchResponse field")

// decodeFetchResponse decodes a FetchResponse from the transport's
// buffers. records returns where its n record bytes go; every other field
// is set in m. Fields may come in any order (tierd's server sends records
// first).
func decodeFetchResponse(data mem.BufferSlice, m *tierdpb.FetchResponse, records func(n int) ([]byte, error)) error {
	r := data.Reader()
	defer r.Close()
	bad := func(what string) error { return fmt.Errorf("fetch: bad FetchResponse: %s", what) }
	for r.Remaining() > 0 {
		tag, err := binary.ReadUvarint(r)
		if err != nil {
			return bad("tag")
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		switch {
		case typ == protowire.VarintType && num >= 2 && num <= 4:
			v, err := binary.ReadUvarint(r)
			if err != nil {
				return bad("varint")
			}
			switch num {
			case 2:
				m.LogStartOffset = int64(v)
			case 3:
				m.HighestTieredOffset = int64(v)
			default:
				m.NextOffset = int64(v)
			}
		case typ == protowire.BytesType && (num == 1 || num == 5):
			n, err := binary.ReadUvarint(r)
			if err != nil || n > uint64(r.Remaining()) {
				return bad("length")
			}
			if num == 1 {
				dst, err := records(int(n))
				if err != nil {
					return err
				}
				if _, err := io.ReadFull(r, dst); err != nil {
					return bad("records")
				}
				continue
			}
			b := make([]byte, n)
			if _, err := io.ReadFull(r, b); err != nil {
				return bad("aborted transaction")
			}
			t := &tierdpb.AbortedTransaction{}
			if err := proto.Unmarshal(b, t); err != nil {
				return bad("aborted transaction")
			}
			m.AbortedTransactions = append(m.AbortedTransactions, t)
		default:
			return errFallback
		}
	}
	return nil
}
