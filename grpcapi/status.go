package grpcapi

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
)

// StatusSource is what the Admin service's PartitionStatus reads: the
// copier's per-partition status (copier.Copier.Status). An Operator given
// to WithAdmin or NewAdmin that also implements it answers PartitionStatus;
// otherwise the call is UNIMPLEMENTED.
type StatusSource interface {
	Status() remotelog.TieringStatus
}

func (a *adminServer) PartitionStatus(_ context.Context, req *tierdpb.PartitionStatusRequest) (*tierdpb.PartitionStatusResponse, error) {
	src, ok := a.op.(StatusSource)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this server has no copier: no partition status")
	}
	s := src.Status()
	if t := req.GetTopic(); t != "" {
		keep := s.Partitions[:0:0]
		for _, p := range s.Partitions {
			if p.Topic == t {
				keep = append(keep, p)
			}
		}
		s.Partitions = keep
	}
	return StatusToProto(s), nil
}

// StatusToProto converts the copier's status for the API.
func StatusToProto(s remotelog.TieringStatus) *tierdpb.PartitionStatusResponse {
	out := &tierdpb.PartitionStatusResponse{Running: s.Running, Passes: s.Passes, LastPassMs: s.LastPassMs, LastSuccessMs: s.LastSuccessMs,
		SkippedTopics: s.SkippedTopics}
	for _, p := range s.Partitions {
		ps := &tierdpb.PartitionStatus{Topic: p.Topic, Partition: p.Partition, Dir: p.Dir, State: string(p.State), Reason: string(p.Reason),
			Held: p.Held, Detail: p.Detail, Error: p.Error, PendingSegments: int32(p.PendingSegments), PendingBytes: p.PendingBytes,
			LocalSegments: int32(p.LocalSegments), LocalBytes: p.LocalBytes, LocalLogStartOffset: p.LocalLogStartOffset,
			ActiveBaseOffset: p.ActiveBaseOffset, HighWatermark: p.HighWatermark, LogStartOffset: p.LogStartOffset,
			HighestTieredOffset: p.HighestTieredOffset, RemoteSegments: int32(p.RemoteSegments), RemoteBytes: p.RemoteBytes,
			MetadataRows: int32(p.MetadataRows), DeleteLagSegments: int32(p.DeleteLagSegments), DeleteLagBytes: p.DeleteLagBytes,
			LastCopyMs: p.LastCopyMs, UpdatedMs: p.UpdatedMs, DamagedCopies: int32(p.DamagedCopies), Damaged: p.Damaged,
			RemoteStoredBytes: p.RemoteStoredBytes, ChunkedSegments: int32(p.ChunkedSegments),
			EncryptedSegments: int32(p.EncryptedSegments)}
		if c := p.Copying; c != nil {
			ps.Copying = &tierdpb.CopyProgress{BaseOffset: c.BaseOffset, EndOffset: c.EndOffset, Bytes: c.Bytes, SentBytes: c.SentBytes, StartedMs: c.StartedMs}
		}
		out.Partitions = append(out.Partitions, ps)
	}
	return out
}

// StatusFromProto converts an API answer back to the copier's status type.
func StatusFromProto(r *tierdpb.PartitionStatusResponse) remotelog.TieringStatus {
	out := remotelog.TieringStatus{Running: r.GetRunning(), Passes: r.GetPasses(), LastPassMs: r.GetLastPassMs(), LastSuccessMs: r.GetLastSuccessMs(),
		SkippedTopics: r.GetSkippedTopics()}
	for _, p := range r.GetPartitions() {
		ps := remotelog.PartitionStatus{Topic: p.GetTopic(), Partition: p.GetPartition(), Dir: p.GetDir(), State: remotelog.TierState(p.GetState()),
			Reason: remotelog.WaitReason(p.GetReason()), Held: p.GetHeld(), Detail: p.GetDetail(), Error: p.GetError(),
			PendingSegments: int(p.GetPendingSegments()), PendingBytes: p.GetPendingBytes(), LocalSegments: int(p.GetLocalSegments()),
			LocalBytes: p.GetLocalBytes(), LocalLogStartOffset: p.GetLocalLogStartOffset(), ActiveBaseOffset: p.GetActiveBaseOffset(),
			HighWatermark: p.GetHighWatermark(), LogStartOffset: p.GetLogStartOffset(), HighestTieredOffset: p.GetHighestTieredOffset(),
			RemoteSegments: int(p.GetRemoteSegments()), RemoteBytes: p.GetRemoteBytes(), MetadataRows: int(p.GetMetadataRows()),
			DeleteLagSegments: int(p.GetDeleteLagSegments()), DeleteLagBytes: p.GetDeleteLagBytes(), LastCopyMs: p.GetLastCopyMs(),
			UpdatedMs: p.GetUpdatedMs(), DamagedCopies: int(p.GetDamagedCopies()), Damaged: p.GetDamaged(),
			RemoteStoredBytes: p.GetRemoteStoredBytes(), ChunkedSegments: int(p.GetChunkedSegments()),
			EncryptedSegments: int(p.GetEncryptedSegments())}
		if c := p.GetCopying(); c != nil {
			ps.Copying = &remotelog.CopyProgress{BaseOffset: c.GetBaseOffset(), EndOffset: c.GetEndOffset(), Bytes: c.GetBytes(),
				SentBytes: c.GetSentBytes(), StartedMs: c.GetStartedMs()}
		}
		out.Partitions = append(out.Partitions, ps)
	}
	return out
}
