package grpcapi

import (
	"sync/atomic"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread"
)

// recordsCodec is the server's gRPC codec: the proto codec, except that
// the records of a Fetch answer go to the transport as they are, not
// copied into a marshal buffer first. The records of a fetchReply are
// views of cached chunks, one per chunk (no gather copy either); a
// FetchResponse's (from servers embedding this package's options, such as
// the benchmark's floor) are its own. The wire bytes are a valid
// FetchResponse (proto fields may come in any order).
type recordsCodec struct{ proto encoding.CodecV2 }

func newRecordsCodec() recordsCodec { return recordsCodec{proto: encoding.GetCodecV2("proto")} }

// zeroCopyMin is the size from which records are not copied.
const zeroCopyMin = 32 << 10

func (c recordsCodec) Name() string { return "proto" }

func (c recordsCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch r := v.(type) {
	case *fetchReply:
		return r.marshal()
	case *tierdpb.FetchResponse:
		if len(r.Records) >= zeroCopyMin {
			head, err := proto.Marshal(&tierdpb.FetchResponse{LogStartOffset: r.LogStartOffset,
				HighestTieredOffset: r.HighestTieredOffset, NextOffset: r.NextOffset, AbortedTransactions: r.AbortedTransactions})
			if err != nil {
				return nil, err
			}
			head = protowire.AppendTag(head, 1, protowire.BytesType)
			head = protowire.AppendVarint(head, uint64(len(r.Records)))
			return mem.BufferSlice{mem.SliceBuffer(head), mem.SliceBuffer(r.Records)}, nil
		}
	}
	return c.proto.Marshal(v)
}

func (c recordsCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

// fetchReply is a FetchResponse (or a FetchStream part) whose records are
// views of cached chunks, held (hold) until gRPC has written them.
type fetchReply struct {
	parts             [][]byte
	n                 int64 // bytes of parts
	logStart, highest int64
	next              int64
	aborted           []*tierdpb.AbortedTransaction
	hold              *remoteread.Hold // nil: parts hold nothing
	taken             atomic.Bool      // marshal took over hold, or it was released
}

// response returns the reply as a FetchResponse with its own copy of the
// records, and lets go of the chunks.
func (r *fetchReply) response() *tierdpb.FetchResponse {
	out := &tierdpb.FetchResponse{LogStartOffset: r.logStart, HighestTieredOffset: r.highest, NextOffset: r.next,
		AbortedTransactions: r.aborted}
	if r.n > 0 {
		out.Records = make([]byte, 0, r.n)
		for _, p := range r.parts {
			out.Records = append(out.Records, p...)
		}
	}
	r.release()
	return out
}

// release lets go of the chunks unless marshal took them over.
func (r *fetchReply) release() {
	if r.hold != nil && !r.taken.Swap(true) {
		r.hold.Done()
	}
}

// tail appends every field but records, each offset even when zero (a
// valid encoding, and it keeps the tail from being empty).
func (r *fetchReply) tail(b []byte) []byte {
	for _, f := range []struct {
		num protowire.Number
		v   int64
	}{{2, r.logStart}, {3, r.highest}, {4, r.next}} {
		b = protowire.AppendTag(b, f.num, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(f.v))
	}
	for _, t := range r.aborted {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(proto.Size(t)))
		var err error
		if b, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(b, t); err != nil {
			panic(err) // two int64 fields cannot fail to marshal
		}
	}
	return b
}

// marshal encodes the reply as field 1 (its tag and length, then the
// views) followed by the other fields. Small records are copied, and the
// chunks let go at once; otherwise the other fields go in a buffer whose
// release, by gRPC once it has written the message, lets go of the chunks.
// gRPC frees a message's buffers in order as it writes them (and all of
// them when the stream ends), so the last buffer's release comes after
// the views were read.
func (r *fetchReply) marshal() (mem.BufferSlice, error) {
	head := protowire.AppendTag(make([]byte, 0, 16), 1, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(r.n))
	if r.n < zeroCopyMin || r.hold == nil {
		b := head
		for _, p := range r.parts {
			b = append(b, p...)
		}
		r.release()
		return mem.BufferSlice{mem.SliceBuffer(r.tail(b))}, nil
	}
	r.taken.Store(true)
	out := make(mem.BufferSlice, 0, len(r.parts)+2)
	out = append(out, mem.SliceBuffer(head))
	for _, p := range r.parts {
		out = append(out, mem.SliceBuffer(p))
	}
	c := 256
	for mem.IsBelowBufferPoolingThreshold(c) { // a smaller one is not reference counted
		c *= 2
	}
	tail := r.tail(make([]byte, 0, c))
	return append(out, mem.NewBuffer(&tail, holdPool{r.hold})), nil
}

// holdPool is the mem.BufferPool of a reply's last buffer: its Put, when
// gRPC frees the buffer, lets go of the reply's chunks.
type holdPool struct{ h *remoteread.Hold }

func (p holdPool) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (p holdPool) Put(*[]byte)       { p.h.Done() }
