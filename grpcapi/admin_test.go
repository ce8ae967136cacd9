package grpcapi

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread"
)

// A read that finds a finished copy's object missing answers DATA_LOSS and
// tells the hook which copy, so the copier checks it.
func TestMissingCopyHook(t *testing.T) {
	var mu sync.Mutex
	var told []remotelog.SegmentMetadata
	e := newEnv(t, DefaultConfig(), WithEngine(remoteread.WithMissingCopyHook(func(m remotelog.SegmentMetadata) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, m)
	})))
	readtest.ReferenceLog(t, e.Rig)
	fin, _ := e.Store.FinishedSegments(e.TP)
	if err := e.Bucket.Delete(context.Background(), e.Mgr.Key(fin[1], ".log")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fetch(300, 1); status.Code(err) != codes.DataLoss {
		t.Fatalf("fetch of a copy without its .log: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 || told[0].ID != fin[1].ID {
		t.Fatalf("hook told %+v, want copy %s", told, fin[1].ID)
	}
}

// fakeOperator answers the Admin service's commands with fixed errors.
type fakeOperator struct{ err error }

func (f fakeOperator) DeleteTopic(_ context.Context, topic, topicID, who string) ([]remotelog.PartitionDeletion, error) {
	if f.err != nil {
		return nil, f.err
	}
	return []remotelog.PartitionDeletion{{TopicPartition: remotelog.TopicPartition{Topic: topic}, TopicID: topicID, Proof: who,
		Segments: []remotelog.SegmentMetadata{{SizeInBytes: 10}, {SizeInBytes: 5}}}}, nil
}

func (f fakeOperator) RestorePartition(_ context.Context, tp remotelog.TopicPartition, topicID, who string) (remotelog.PartitionDeletion, error) {
	return remotelog.PartitionDeletion{}, f.err
}

// The Admin service maps the error classes to gRPC codes, over a real
// socket, and converts what it returns; the operator it records is the
// caller the kernel names on the admin socket, not the request's own
// operator field.
func TestAdminCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{nil, codes.OK},
		{fmt.Errorf("x: %w", remotelog.ErrNotFound), codes.NotFound},
		{fmt.Errorf("x: %w", remotelog.ErrRefused), codes.FailedPrecondition},
		{fmt.Errorf("x: %w", remotelog.ErrCannotCheck), codes.Unavailable},
		{fmt.Errorf("x: %w", remotelog.ErrAmbiguous), codes.InvalidArgument},
		{fmt.Errorf("disk on fire"), codes.Internal},
	} {
		e := newEnv(t, DefaultConfig(), WithAdmin(fakeOperator{tc.err}, e0(t), Identity{}))
		resp, err := e.local.Admin().DeleteTopic(context.Background(), &tierdpb.DeleteTopicRequest{Topic: "orders", TopicId: "id", Operator: "me@host"})
		if status.Code(err) != tc.want {
			t.Errorf("%v: code %s, want %s", tc.err, status.Code(err), tc.want)
		}
		if tc.err == nil && (len(resp.GetDeletions()) != 1 || resp.Deletions[0].Bytes != 15 || resp.Deletions[0].Segments != 2 || resp.Deletions[0].Proof != LocalCaller().Principal+fmt.Sprintf(" (admin socket, uid %d)", os.Getuid())) {
			t.Errorf("response %+v", resp)
		}
	}
	e := newEnv(t, DefaultConfig(), WithAdmin(fakeOperator{}, e0(t), Identity{InstanceID: "i1", MetadataDir: "/m"}))
	if _, err := e.local.Admin().DeleteTopic(context.Background(), &tierdpb.DeleteTopicRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("empty topic: %v", err)
	}
	if _, err := e.local.Admin().RestorePartition(context.Background(), &tierdpb.RestorePartitionRequest{Topic: "t", Partition: -1}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("negative partition: %v", err)
	}
	if _, err := e.local.Admin().Journal(context.Background(), &tierdpb.JournalRequest{Limit: -1}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("negative limit: %v", err)
	}
	if id, err := e.local.Admin().Identity(context.Background(), &tierdpb.IdentityRequest{}); err != nil || id.InstanceId != "i1" || id.MetadataDir != "/m" {
		t.Errorf("identity %+v %v", id, err)
	}
}

// e0 is an empty metadata store serving as the deletion log.
func e0(t *testing.T) DeletionLog { return newEnv(t, DefaultConfig()).Store }
