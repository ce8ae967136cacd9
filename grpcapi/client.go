package grpcapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/proto/tierdpb"
)

// ErrOutOfRange is returned (wrapped in *OutOfRangeError) by the client for
// offsets outside the tiered range.
var ErrOutOfRange = errors.New("fetch: offset out of the tiered range")

// OutOfRangeError carries the valid range the server reported.
type OutOfRangeError struct {
	Offset, LogStartOffset, HighestTieredOffset int64
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("fetch: offset %d out of the tiered range [%d, %d]", e.Offset, e.LogStartOffset, e.HighestTieredOffset)
}

// Unwrap makes errors.Is(err, ErrOutOfRange) true.
func (e *OutOfRangeError) Unwrap() error { return ErrOutOfRange }

// Client is a gRPC client of the remote fetch service.
type Client struct {
	conn     *grpc.ClientConn
	c        tierdpb.RemoteFetchClient
	noStream atomic.Bool // the server has no FetchStream: use Fetch
}

// Admin returns a client of the Admin service on the same connection.
func (c *Client) Admin() tierdpb.AdminClient { return tierdpb.NewAdminClient(c.conn) }

// DialOption configures Dial.
type DialOption func(*dialOptions)

type dialOptions struct {
	tls   *tls.Config
	token string
}

// WithToken sends token as every call's bearer token ("authorization:
// Bearer <token>", see Auth). Over plaintext it travels in the clear:
// use it with WithClientTLS beyond loopback.
func WithToken(token string) DialOption { return func(o *dialOptions) { o.token = token } }

// bearer is a token as gRPC per-call credentials.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// WithClientTLS connects over TLS with c: its RootCAs the authorities the
// server's certificate must chain to (nil: the system's), its
// Certificates the client certificate for a server that requires one.
// Default: plaintext.
func WithClientTLS(c *tls.Config) DialOption { return func(o *dialOptions) { o.tls = c } }

// Dial connects to a tierd fetch server at addr (host:port), plaintext
// unless WithClientTLS is given. The connection is made lazily. The
// client accepts responses of any size (a Fetch answer holds at least one
// whole batch, up to fetch.max.bytes and more), unlike gRPC's default
// 4 MiB receive limit. A FetchResponse's records are copied once from the
// transport (clientCodec), not twice as by the proto codec.
func Dial(addr string, opts ...DialOption) (*Client, error) {
	var o dialOptions
	for _, opt := range opts {
		opt(&o)
	}
	creds := insecure.NewCredentials()
	if o.tls != nil {
		creds = credentials.NewTLS(o.tls)
	}
	extra := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if o.token != "" {
		extra = append(extra, grpc.WithPerRPCCredentials(bearer(o.token)))
	}
	conn, err := grpc.NewClient(addr, append(extra,
		// A response holds at least one whole batch, whatever its size.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.ForceCodecV2(newClientCodec())),
		grpc.WithInitialWindowSize(windowBytes), grpc.WithInitialConnWindowSize(windowBytes),
		grpc.WithWriteBufferSize(ioBufferBytes), grpc.WithReadBufferSize(ioBufferBytes))...)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, c: tierdpb.NewRemoteFetchClient(conn)}, nil
}

// WaitReady connects and reports whether a server answered before ctx
// ended; a refused connection answers false at once.
func (c *Client) WaitReady(ctx context.Context) bool {
	c.conn.Connect()
	for {
		st := c.conn.GetState()
		switch st {
		case connectivity.Ready:
			return true
		case connectivity.TransientFailure, connectivity.Shutdown:
			return false // nothing listens there
		}
		if !c.conn.WaitForStateChange(ctx, st) {
			return false
		}
	}
}

// Health returns a client of the standard health service on the same
// connection.
func (c *Client) Health() healthpb.HealthClient { return healthpb.NewHealthClient(c.conn) }

// API returns the generated client.
func (c *Client) API() tierdpb.RemoteFetchClient { return c.c }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Partition returns a reader of one partition's remote log, which
// satisfies seglog.RemoteReader. It is safe for concurrent use.
func (c *Client) Partition(topic string, partition int32) *PartitionReader {
	return &PartitionReader{c: c.c, cl: c, topic: topic, partition: partition}
}

// PartitionReader reads one partition's tiered log.
type PartitionReader struct {
	c         tierdpb.RemoteFetchClient
	cl        *Client
	topic     string
	partition int32
}

// ReadRemote fetches whole batches from offset (see the Fetch RPC), with
// FetchStream: the caller owns the returned bytes. An OUT_OF_RANGE status
// becomes *OutOfRangeError.
func (p *PartitionReader) ReadRemote(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	rs, err := p.cl.fetch(ctx, &tierdpb.FetchRequest{Topic: p.topic, Partition: p.partition, Offset: offset,
		MaxBytes: int32(min(maxBytes, 1<<31-1))})
	if err != nil {
		return nil, err
	}
	return rs.Records, nil
}

// Fetch fetches whole batches from offset as the Fetch RPC does (through
// FetchStream, see clientstream.go), with the isolation level
// iso. The returned Records live in a buffer from a pool: valid until
// Release. A caller that never calls Release leaves the buffer to the
// garbage collector (no harm, only no reuse). An OUT_OF_RANGE status
// becomes *OutOfRangeError; other errors are gRPC statuses (see the
// service's doc in proto/tierd.proto) or ctx's.
func (p *PartitionReader) Fetch(ctx context.Context, offset int64, maxBytes int, iso tierdpb.IsolationLevel) (*Batches, error) {
	return p.cl.fetchInto(ctx, &tierdpb.FetchRequest{Topic: p.topic, Partition: p.partition, Offset: offset,
		MaxBytes: int32(min(maxBytes, 1<<31-1)), IsolationLevel: iso}, recordsPool)
}

// RemoteLogStartOffset returns the log start offset of the whole log, or
// math.MaxInt64 when nothing is tiered yet (so the local start wins).
func (p *PartitionReader) RemoteLogStartOffset(ctx context.Context) (int64, error) {
	resp, err := p.c.ListOffsets(ctx, &tierdpb.ListOffsetsRequest{Topic: p.topic, Partition: p.partition, Spec: tierdpb.OffsetSpec_EARLIEST})
	if status.Code(err) == codes.NotFound {
		return math.MaxInt64, nil
	}
	if err != nil {
		return 0, fromStatus(-1, err)
	}
	return resp.Offset, nil
}

func fromStatus(offset int64, err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.OutOfRange {
		return err
	}
	for _, d := range st.Details() {
		if r, ok := d.(*tierdpb.OffsetRange); ok {
			return &OutOfRangeError{Offset: offset, LogStartOffset: r.LogStartOffset, HighestTieredOffset: r.HighestTieredOffset}
		}
	}
	return err
}

// RemoteOffsetForTimestamp returns the first tiered offset whose record
// timestamp is >= ts, and found false when no tiered record is that late.
func (p *PartitionReader) RemoteOffsetForTimestamp(ctx context.Context, ts int64) (offset, timestamp int64, found bool, err error) {
	resp, err := p.c.ListOffsets(ctx, &tierdpb.ListOffsetsRequest{Topic: p.topic, Partition: p.partition, Spec: tierdpb.OffsetSpec_TIMESTAMP, Timestamp: ts})
	if status.Code(err) == codes.NotFound {
		return 0, 0, false, nil // nothing tiered yet
	}
	if err != nil {
		return 0, 0, false, err
	}
	return resp.Offset, resp.Timestamp, resp.Offset >= 0, nil
}
