package fetch

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tierd/tierd/proto/tierdpb"
)

// recordsCodec is the server's gRPC codec: the proto codec, except that a
// FetchResponse's records go to the transport as they are, not copied into
// a marshal buffer first. Records are slices of immutable cached chunks
// (or a response's own copy), so the transport may read them until it has
// written them. The wire bytes are a valid FetchResponse: every other field
// first, then field 1 (proto fields may come in any order).
type recordsCodec struct{ proto encoding.CodecV2 }

func newRecordsCodec() recordsCodec { return recordsCodec{proto: encoding.GetCodecV2("proto")} }

// zeroCopyMin is the size from which records are not copied.
const zeroCopyMin = 32 << 10

func (c recordsCodec) Name() string { return "proto" }

func (c recordsCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(*tierdpb.FetchResponse)
	if !ok || len(r.Records) < zeroCopyMin {
		return c.proto.Marshal(v)
	}
	head, err := proto.Marshal(&tierdpb.FetchResponse{LogStartOffset: r.LogStartOffset,
		HighestTieredOffset: r.HighestTieredOffset, NextOffset: r.NextOffset, AbortedTransactions: r.AbortedTransactions})
	if err != nil {
		return nil, err
	}
	head = protowire.AppendTag(head, 1, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(r.Records)))
	return mem.BufferSlice{mem.SliceBuffer(head), mem.SliceBuffer(r.Records)}, nil
}

func (c recordsCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }
