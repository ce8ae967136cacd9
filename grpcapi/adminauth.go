package grpcapi

import (
	"context"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/proto/tierdpb"
)

// adminEdge is the Admin service as the gRPC server serves it: each call
// authorized (see Auth) before adminServer runs it, and answers listing
// several topics cut to those the caller may describe.
type adminEdge struct {
	tierdpb.UnimplementedAdminServer
	a *adminServer
	s *Server
}

// caller returns ctx's caller, refusing an anonymous one on TCP.
func (e *adminEdge) caller(ctx context.Context) (Caller, error) {
	c, ok := CallerFrom(ctx)
	if !ok {
		return c, status.Error(codes.Internal, "fetch: the call has no identified caller")
	}
	if !c.Local && c.Principal == Anonymous {
		return c, status.Error(codes.Unauthenticated,
			"the Admin service needs an authenticated caller: a token (fetch.tokens_file) or a client certificate (tls.grpc: mtls), or the admin socket")
	}
	return c, nil
}

// admin reports whether c may use every Admin method.
func (e *adminEdge) admin(c Caller) bool {
	return c.Local || slices.Contains(e.s.auth.AdminPrincipals, c.Principal)
}

// may reports whether c may do op on topic: an admin principal may;
// otherwise the Authorizer decides, and without one nobody else may.
func (e *adminEdge) may(c Caller, op kafkaacl.Operation, topic string) bool {
	if e.admin(c) {
		return true
	}
	return e.s.auth.Authorizer != nil && e.s.allowed(c, op, topic)
}

// check returns nil when ctx's caller may do op on topic, else the
// status to answer.
func (e *adminEdge) check(ctx context.Context, op kafkaacl.Operation, topic string) (context.Context, error) {
	c, err := e.caller(ctx)
	if err != nil {
		return ctx, err
	}
	if !e.may(c, op, topic) {
		return ctx, status.Errorf(codes.PermissionDenied, "%s may not %s topic %q (it needs %s on it, or to be one of fetch.admin.principals)",
			c.Principal, op, topic, op)
	}
	return ctx, nil
}

func (e *adminEdge) Identity(ctx context.Context, r *tierdpb.IdentityRequest) (*tierdpb.IdentityResponse, error) {
	if _, err := e.caller(ctx); err != nil {
		return nil, err
	}
	return e.a.Identity(ctx, r)
}

func (e *adminEdge) DeleteTopic(ctx context.Context, r *tierdpb.DeleteTopicRequest) (*tierdpb.DeletionsResponse, error) {
	ctx, err := e.check(ctx, kafkaacl.OpDelete, r.GetTopic())
	if err != nil {
		return nil, err
	}
	return e.a.DeleteTopic(ctx, r)
}

func (e *adminEdge) RestorePartition(ctx context.Context, r *tierdpb.RestorePartitionRequest) (*tierdpb.DeletionsResponse, error) {
	ctx, err := e.check(ctx, kafkaacl.OpAlter, r.GetTopic())
	if err != nil {
		return nil, err
	}
	return e.a.RestorePartition(ctx, r)
}

func (e *adminEdge) ListDeletions(ctx context.Context, r *tierdpb.ListDeletionsRequest) (*tierdpb.DeletionsResponse, error) {
	c, err := e.caller(ctx)
	if err != nil {
		return nil, err
	}
	if r.GetTopic() != "" && !e.may(c, kafkaacl.OpDescribe, r.GetTopic()) {
		return nil, status.Errorf(codes.PermissionDenied, "%s may not DESCRIBE topic %q", c.Principal, r.GetTopic())
	}
	resp, err := e.a.ListDeletions(ctx, r)
	if err != nil {
		return nil, err
	}
	resp.Deletions = slices.DeleteFunc(resp.Deletions, func(d *tierdpb.PartitionDeletion) bool { return !e.may(c, kafkaacl.OpDescribe, d.GetTopic()) })
	return resp, nil
}

func (e *adminEdge) Journal(ctx context.Context, r *tierdpb.JournalRequest) (*tierdpb.JournalResponse, error) {
	c, err := e.caller(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := e.a.Journal(ctx, r)
	if err != nil {
		return nil, err
	}
	// An entry of a topic the caller may not describe is left out, and
	// one of no topic is an admin's alone.
	resp.Entries = slices.DeleteFunc(resp.Entries, func(j *tierdpb.JournalEntry) bool {
		return !e.admin(c) && (j.GetTopic() == "" || !e.may(c, kafkaacl.OpDescribe, j.GetTopic()))
	})
	return resp, nil
}

func (e *adminEdge) ListPartitions(ctx context.Context, r *tierdpb.ListPartitionsRequest) (*tierdpb.ListPartitionsResponse, error) {
	c, err := e.caller(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := e.a.ListPartitions(ctx, r)
	if err != nil {
		return nil, err
	}
	resp.Partitions = slices.DeleteFunc(resp.Partitions, func(p *tierdpb.TopicPartition) bool { return !e.may(c, kafkaacl.OpDescribe, p.GetTopic()) })
	return resp, nil
}

func (e *adminEdge) PartitionStatus(ctx context.Context, r *tierdpb.PartitionStatusRequest) (*tierdpb.PartitionStatusResponse, error) {
	c, err := e.caller(ctx)
	if err != nil {
		return nil, err
	}
	if r.GetTopic() != "" && !e.may(c, kafkaacl.OpDescribe, r.GetTopic()) {
		return nil, status.Errorf(codes.PermissionDenied, "%s may not DESCRIBE topic %q", c.Principal, r.GetTopic())
	}
	resp, err := e.a.PartitionStatus(ctx, r)
	if err != nil {
		return nil, err
	}
	if !e.admin(c) {
		resp.Partitions = slices.DeleteFunc(resp.Partitions, func(p *tierdpb.PartitionStatus) bool { return !e.may(c, kafkaacl.OpDescribe, p.GetTopic()) })
		resp.SkippedTopics = nil
	}
	return resp, nil
}
