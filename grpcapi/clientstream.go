package grpcapi

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/proto/tierdpb"
)

// Batches is a Fetch answer read by PartitionReader.Fetch.
type Batches struct {
	// Records are whole record batches, byte for byte as stored; valid
	// until Release.
	Records []byte
	// NextOffset is the offset after the last batch (the highest tiered
	// offset + 1 when Records is empty).
	NextOffset int64
	// LogStartOffset and HighestTieredOffset are the partition's, from
	// the server's metadata snapshot.
	LogStartOffset, HighestTieredOffset int64
	// AbortedTransactions are listed with READ_COMMITTED (see the
	// FetchResponse message).
	AbortedTransactions []*tierdpb.AbortedTransaction

	pool *bufPool // nil: Records are the garbage collector's
}

// Release returns the Records' buffer for reuse; Records is nil after.
// Calls after the first do nothing.
func (b *Batches) Release() {
	if b.pool != nil && b.Records != nil {
		b.pool.put(b.Records)
	}
	b.Records, b.pool = nil, nil
}

// bufPool keeps record buffers for reuse.
type bufPool struct{ p sync.Pool }

var recordsPool = &bufPool{}

// get returns an empty buffer of at least capacity c.
func (p *bufPool) get(c int) []byte {
	if b, ok := p.p.Get().(*[]byte); ok && cap(*b) >= c {
		return (*b)[:0]
	}
	return make([]byte, 0, c)
}

func (p *bufPool) put(b []byte) {
	b = b[:0]
	p.p.Put(&b)
}

// maxHintBytes caps the buffer a pooled Fetch starts with (max_bytes
// may be up to 2 GiB).
const maxHintBytes = 64 << 20

// fetch is fetchInto with buffers the caller owns.
func (c *Client) fetch(ctx context.Context, req *tierdpb.FetchRequest) (*Batches, error) {
	return c.fetchInto(ctx, req, nil)
}

// fetchInto reads a Fetch answer with FetchStream (or with Fetch, from a
// server without FetchStream), the records of every part going straight
// into one buffer: from pool (sized for max_bytes at once) or, with pool
// nil, the garbage collector's (sized by the parts as they come, so that
// an answer from the server's cache, which comes in one part, gets a
// buffer of its size). An error after parts with records ends the answer
// with those records (whole batches; the next fetch meets the error
// again), except with READ_COMMITTED: its aborted transactions come in the
// last part, so records without it would pass aborted records as
// committed, and the error is the answer.
func (c *Client) fetchInto(ctx context.Context, req *tierdpb.FetchRequest, pool *bufPool) (*Batches, error) {
	into := &recordsInto{}
	out := &Batches{pool: pool}
	if pool != nil {
		into.alloc, into.hint = pool.get, min(int(req.MaxBytes), maxHintBytes)
	}
	take := func() {
		out.NextOffset, out.LogStartOffset, out.HighestTieredOffset = into.resp.NextOffset, into.resp.LogStartOffset, into.resp.HighestTieredOffset
		out.AbortedTransactions = append(out.AbortedTransactions, into.resp.AbortedTransactions...)
	}
	committed := req.GetIsolationLevel() == tierdpb.IsolationLevel_READ_COMMITTED
	done := func(err error) (*Batches, error) {
		if err != nil && (len(into.buf) == 0 || ctx.Err() != nil || committed) {
			if pool != nil && into.buf != nil {
				pool.put(into.buf)
			}
			return nil, fromStatus(req.GetOffset(), err)
		}
		out.Records = into.buf
		return out, nil
	}
	if !c.noStream.Load() {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := c.c.FetchStream(sctx, req)
		parts := 0
		for err == nil {
			if err = st.RecvMsg(into); err == nil {
				parts++
				take()
			}
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		if status.Code(err) != codes.Unimplemented || parts > 0 {
			return done(err)
		}
		c.noStream.Store(true) // a server from before FetchStream
	}
	err := c.conn.Invoke(ctx, tierdpb.RemoteFetch_Fetch_FullMethodName, req, into)
	if err == nil {
		take()
	}
	return done(err)
}
