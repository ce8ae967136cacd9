// Package grpcapi is the gRPC edge of the remote read engine (package
// remoteread): *Server serves tierd's RemoteFetch service (Fetch and
// FetchStream by offset, ListOffsets, ListSegments) over a
// *remoteread.Engine, the Admin service (admin.go, over the copier's
// Operator), the standard health service (grpc.health.v1, following the
// readiness given by WithReadiness) and server reflection, over TLS when
// WithTLS is given (health.go), to the callers auth.go lets in, on
// fetch.listen and on the admin socket (localsock.go). Client (client.go)
// is its Go client. Callers in process read through Server.Engine, not
// through gRPC.
//
// A Fetch answer can exceed gRPC's default 4 MiB receive limit: Dial's
// client sets none; other clients must raise theirs to fetch.max.bytes
// plus the largest batch.
//
// # Answers without a copy
//
// Fetch answers with the engine's views of cached chunks
// (remoteread.Engine.ReadViews), one per chunk, sent without a copy
// (recordsCodec, fetchReply) and held until gRPC has written them (then
// the chunks' buffers may go back to the cache's pool). FetchStream sends
// the batches as their bytes arrive (stream.go); the client copies
// records once from the transport into their buffer (clientcodec.go,
// clientstream.go).
//
// # Errors
//
// The engine's error classes (remoteread.ErrInvalidArgument,
// ErrNotTiered, *RangeError, ErrStillLoading, ErrDataLoss, ...) become
// gRPC codes here and only here: toStatus (errors.go) lists the mapping.
// The client maps OUT_OF_RANGE back to *OutOfRangeError.
package grpcapi
