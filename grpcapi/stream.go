package grpcapi

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread"
)

// This file answers Fetch and FetchStream without copying records: the
// answers are views of cached chunks (fetchReply), which the codec hands
// to the transport as they are.

// Fetch implements tierdpb.RemoteFetchServer for callers in process: the
// answer's records are a copy. Over gRPC, fetchHandler answers instead,
// without the copy.
func (s *Server) Fetch(ctx context.Context, req *tierdpb.FetchRequest) (*tierdpb.FetchResponse, error) {
	r, err := s.fetchUnary(ctx, req)
	if err != nil {
		return nil, err
	}
	return r.response(), nil
}

// fetchUnary answers a Fetch as views of cached chunks: the caller
// releases the reply (the codec does, once gRPC has written it).
func (s *Server) fetchUnary(ctx context.Context, req *tierdpb.FetchRequest) (*fetchReply, error) {
	ctx, cancel := context.WithTimeout(ctx, s.e.RequestTimeout())
	defer cancel()
	r, err := s.fetch(ctx, req)
	return r, s.observe("Fetch", err)
}

func (s *Server) fetch(ctx context.Context, req *tierdpb.FetchRequest) (*fetchReply, error) {
	iso := req.GetIsolationLevel()
	if iso != tierdpb.IsolationLevel_READ_UNCOMMITTED && iso != tierdpb.IsolationLevel_READ_COMMITTED {
		return nil, invalidf("unknown isolation level %v", iso)
	}
	tp := remotelog.TopicPartition{Topic: req.Topic, Partition: req.Partition}
	rr, err := s.e.ReadViews(ctx, tp, req.Offset, int64(req.MaxBytes), nil)
	if err != nil {
		return nil, err
	}
	r := &fetchReply{parts: rr.Parts, n: rr.Bytes, hold: rr.Hold, logStart: rr.Offsets.LogStartOffset,
		highest: rr.Offsets.HighestTieredOffset, next: rr.Next}
	if r.aborted, err = s.abortedForReply(ctx, iso, tp, req.Offset, rr); err != nil {
		r.release()
		return nil, err
	}
	return r, nil
}

// abortedForReply lists, with READ_COMMITTED and records, the aborted
// transactions overlapping [offset, rr.Next).
func (s *Server) abortedForReply(ctx context.Context, iso tierdpb.IsolationLevel, tp remotelog.TopicPartition, offset int64, rr remoteread.Views) ([]*tierdpb.AbortedTransaction, error) {
	if iso != tierdpb.IsolationLevel_READ_COMMITTED || rr.Bytes == 0 {
		return nil, nil
	}
	txns, err := s.e.RemoteAbortedTxns(ctx, tp, offset, rr.Next)
	if err != nil {
		return nil, err
	}
	out := make([]*tierdpb.AbortedTransaction, len(txns))
	for i, t := range txns {
		out[i] = &tierdpb.AbortedTransaction{ProducerId: t.ProducerID, FirstOffset: t.FirstOffset}
	}
	return out, nil
}

// fetchHandler is the gRPC handler of Fetch (in place of the generated
// one, which would need a *tierdpb.FetchResponse): it answers with a
// fetchReply, which the server's codec encodes.
func fetchHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(tierdpb.FetchRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	s := srv.(*Server)
	h := func(ctx context.Context, req any) (any, error) {
		r, err := s.fetchUnary(ctx, req.(*tierdpb.FetchRequest))
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	if interceptor == nil {
		return h(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: tierdpb.RemoteFetch_Fetch_FullMethodName}, h)
}

// remoteFetchDesc is the generated service description with fetchHandler
// for Fetch; the service's name and file stay, so reflection and clients
// see the same service.
func remoteFetchDesc() *grpc.ServiceDesc {
	d := tierdpb.RemoteFetch_ServiceDesc
	d.Methods = slices.Clone(d.Methods)
	for i := range d.Methods {
		if d.Methods[i].MethodName == "Fetch" {
			d.Methods[i].Handler = fetchHandler
		}
	}
	return &d
}

// FetchStream implements tierdpb.RemoteFetchServer: the answer of Fetch
// as parts sent as their bytes arrive (see remoteread.Run), each a fetchReply.
//
// Behavior:
//   - Arguments, limits and errors are Fetch's; an error before the first
//     part is the stream's status, as Fetch's would be.
//   - Each part holds whole batches continuing the previous part's, and
//     the offsets of the read's metadata snapshot; its next_offset is the
//     offset after its last batch.
//   - A read that retention raced starts over only while nothing was sent.
//   - A load failing after whole batches arrived ends the answer with
//     them, as Fetch's does: the stream ends OK (with READ_COMMITTED,
//     after the part listing the aborted transactions).
//   - One more part, without records, ends the answer when there were no
//     records (its next_offset says where the tiered log ends) or when it
//     lists aborted transactions (READ_COMMITTED).
func (s *Server) FetchStream(req *tierdpb.FetchRequest, stream grpc.ServerStreamingServer[tierdpb.FetchResponse]) error {
	ctx, cancel := context.WithTimeout(stream.Context(), s.e.RequestTimeout())
	defer cancel()
	err := s.fetchStream(ctx, req, stream)
	var se sendError
	if errors.As(err, &se) { // the stream broke: its status is gRPC's
		s.reqs.WithLabelValues("FetchStream", status.Code(se.err).String()).Inc()
		return se.err
	}
	return s.observe("FetchStream", err)
}

// sendError is a failed send of a stream part.
type sendError struct{ err error }

func (e sendError) Error() string { return e.err.Error() }

func (s *Server) fetchStream(ctx context.Context, req *tierdpb.FetchRequest, stream grpc.ServerStream) error {
	iso := req.GetIsolationLevel()
	if iso != tierdpb.IsolationLevel_READ_UNCOMMITTED && iso != tierdpb.IsolationLevel_READ_COMMITTED {
		return invalidf("unknown isolation level %v", iso)
	}
	tp := remotelog.TopicPartition{Topic: req.Topic, Partition: req.Partition}
	send := func(rn remoteread.Run) error {
		r := &fetchReply{parts: rn.Parts, next: rn.Next, hold: rn.Hold, logStart: rn.Offsets.LogStartOffset,
			highest: rn.Offsets.HighestTieredOffset}
		for _, p := range rn.Parts {
			r.n += int64(len(p))
		}
		if r.hold != nil {
			r.hold.Add()
		}
		err := stream.SendMsg(r)
		r.release() // when the codec did not take the chunks over
		if err != nil {
			return sendError{err}
		}
		return nil
	}
	rr, err := s.e.ReadViews(ctx, tp, req.Offset, int64(req.MaxBytes), send)
	if err != nil {
		return err
	}
	aborted, err := s.abortedForReply(ctx, iso, tp, req.Offset, rr)
	if err != nil {
		return err
	}
	if rr.Bytes == 0 || len(aborted) > 0 {
		if err := stream.SendMsg(&fetchReply{logStart: rr.Offsets.LogStartOffset, highest: rr.Offsets.HighestTieredOffset,
			next: rr.Next, aborted: aborted}); err != nil {
			return sendError{err}
		}
	}
	return nil
}
