package grpcapi

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
)

// Operator is what the Admin service needs from the copier: the operator
// commands on whole-partition deletions, run between its passes.
type Operator interface {
	DeleteTopic(ctx context.Context, topic, topicID, who string) ([]remotelog.PartitionDeletion, error)
	RestorePartition(ctx context.Context, tp remotelog.TopicPartition, topicID, who string) (remotelog.PartitionDeletion, error)
}

// DeletionLog is what the Admin service reads from rlmm.Store.
type DeletionLog interface {
	Deletions(tp *remotelog.TopicPartition) ([]remotelog.PartitionDeletion, error)
	Journal(afterSeq int64, limit int) ([]remotelog.JournalEntry, error)
	Partitions() ([]remotelog.TopicPartition, error)
}

// Identity says which tierd serves the Admin service.
type Identity struct {
	InstanceID  string
	MetadataDir string // absolute
	LogDirs     []string
	BrokerID    int32
}

// WithAdmin serves the Admin service (see proto/tierd.proto) on the same
// listener as the fetch service.
func WithAdmin(op Operator, dl DeletionLog, id Identity) Option {
	return func(s *Server) { s.admin = &adminServer{op: op, dl: dl, id: id} }
}

// NewAdmin returns the Admin service over op and dl, for use in process
// (a tool acting on a stopped tierd's metadata): its errors are the gRPC
// statuses a remote call would return.
func NewAdmin(op Operator, dl DeletionLog, id Identity) tierdpb.AdminServer {
	return &adminServer{op: op, dl: dl, id: id}
}

// adminServer implements tierdpb.AdminServer.
type adminServer struct {
	tierdpb.UnimplementedAdminServer
	op     Operator
	dl     DeletionLog
	id     Identity
	groups GroupSource // nil: no ConsumerGroups
}

func (a *adminServer) Identity(context.Context, *tierdpb.IdentityRequest) (*tierdpb.IdentityResponse, error) {
	return &tierdpb.IdentityResponse{InstanceId: a.id.InstanceID, MetadataDir: a.id.MetadataDir, LogDirs: a.id.LogDirs, BrokerId: a.id.BrokerID}, nil
}

func (a *adminServer) ListPartitions(context.Context, *tierdpb.ListPartitionsRequest) (*tierdpb.ListPartitionsResponse, error) {
	tps, err := a.dl.Partitions()
	if err != nil {
		return nil, adminStatus(err)
	}
	resp := &tierdpb.ListPartitionsResponse{}
	for _, tp := range tps {
		resp.Partitions = append(resp.Partitions, &tierdpb.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	return resp, nil
}

// operatorOf is who runs a command, for the journal: the caller the
// server identified, or in process (NewAdmin) the one WithCaller gave,
// else the user running this process. A request's own operator field is
// not believed.
func operatorOf(ctx context.Context) string {
	if c, ok := CallerFrom(ctx); ok {
		return c.String()
	}
	return LocalCaller().String()
}

// adminStatus maps the error classes of internal/remotelog to gRPC codes.
func adminStatus(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Internal
	switch {
	case errors.Is(err, remotelog.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, remotelog.ErrRefused):
		code = codes.FailedPrecondition
	case errors.Is(err, remotelog.ErrCannotCheck):
		code = codes.Unavailable
	case errors.Is(err, remotelog.ErrAmbiguous):
		code = codes.InvalidArgument
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Error(code, err.Error())
}

// DeletionToProto converts a scheduled deletion.
func DeletionToProto(d remotelog.PartitionDeletion) *tierdpb.PartitionDeletion {
	return &tierdpb.PartitionDeletion{Topic: d.TopicPartition.Topic, Partition: d.TopicPartition.Partition, TopicId: d.TopicID,
		Reason: string(d.Reason), Proof: d.Proof, ScheduledMs: d.ScheduledMs, DueMs: d.DueMs, State: string(d.State),
		Segments: int32(len(d.Segments)), Bytes: d.Bytes()}
}

// JournalEntryToProto converts a journal entry.
func JournalEntryToProto(e remotelog.JournalEntry) *tierdpb.JournalEntry {
	return &tierdpb.JournalEntry{Seq: e.Seq, TimeMs: e.TimeMs, Event: e.Event, Topic: e.TopicPartition.Topic,
		Partition: e.TopicPartition.Partition, TopicId: e.TopicID, Reason: string(e.Reason), Proof: e.Proof,
		DueMs: e.DueMs, Segments: int32(e.Segments), Bytes: e.Bytes, Detail: e.Detail}
}

func deletionsResponse(ds ...remotelog.PartitionDeletion) *tierdpb.DeletionsResponse {
	resp := &tierdpb.DeletionsResponse{}
	for _, d := range ds {
		resp.Deletions = append(resp.Deletions, DeletionToProto(d))
	}
	return resp
}

func (a *adminServer) DeleteTopic(ctx context.Context, req *tierdpb.DeleteTopicRequest) (*tierdpb.DeletionsResponse, error) {
	if req.GetTopic() == "" {
		return nil, status.Error(codes.InvalidArgument, "topic is required")
	}
	ds, err := a.op.DeleteTopic(ctx, req.GetTopic(), req.GetTopicId(), operatorOf(ctx))
	if err != nil {
		return nil, adminStatus(err)
	}
	return deletionsResponse(ds...), nil
}

func (a *adminServer) RestorePartition(ctx context.Context, req *tierdpb.RestorePartitionRequest) (*tierdpb.DeletionsResponse, error) {
	if req.GetTopic() == "" || req.GetPartition() < 0 {
		return nil, status.Error(codes.InvalidArgument, "topic and a partition >= 0 are required")
	}
	tp := remotelog.TopicPartition{Topic: req.GetTopic(), Partition: req.GetPartition()}
	d, err := a.op.RestorePartition(ctx, tp, req.GetTopicId(), operatorOf(ctx))
	if err != nil {
		return nil, adminStatus(err)
	}
	return deletionsResponse(d), nil
}

func (a *adminServer) ListDeletions(_ context.Context, req *tierdpb.ListDeletionsRequest) (*tierdpb.DeletionsResponse, error) {
	var tp *remotelog.TopicPartition
	if req.GetTopic() != "" {
		if req.GetPartition() < 0 {
			return nil, status.Error(codes.InvalidArgument, "partition must be >= 0")
		}
		tp = &remotelog.TopicPartition{Topic: req.GetTopic(), Partition: req.GetPartition()}
	}
	ds, err := a.dl.Deletions(tp)
	if err != nil {
		return nil, adminStatus(err)
	}
	return deletionsResponse(ds...), nil
}

func (a *adminServer) Journal(_ context.Context, req *tierdpb.JournalRequest) (*tierdpb.JournalResponse, error) {
	if req.GetLimit() < 0 || req.GetAfterSeq() < 0 {
		return nil, status.Error(codes.InvalidArgument, "after_seq and limit must not be negative")
	}
	es, err := a.dl.Journal(req.GetAfterSeq(), int(req.GetLimit()))
	if err != nil {
		return nil, adminStatus(err)
	}
	resp := &tierdpb.JournalResponse{}
	for _, e := range es {
		resp.Entries = append(resp.Entries, JournalEntryToProto(e))
	}
	return resp, nil
}
