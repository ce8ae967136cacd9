package listener

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkaacl"
)

// Special ListOffsets timestamps (ListOffsetsRequest.java) and the first
// version that may ask for each (ReplicaManager
// timestampMinSupportedVersion).
const (
	tsLatest       = -1 // LATEST_TIMESTAMP
	tsEarliest     = -2 // EARLIEST_TIMESTAMP
	tsMax          = -3 // MAX_TIMESTAMP, KIP-734
	tsEarliestLoc  = -4 // EARLIEST_LOCAL_TIMESTAMP, KIP-405
	tsLatestTiered = -5 // LATEST_TIERED_TIMESTAMP, KIP-1005
)

var tsMinVersion = map[int64]int16{tsLatest: 1, tsEarliest: 1, tsMax: 7, tsEarliestLoc: 8, tsLatestTiered: 9}

// handleListOffsets answers ListOffsets v0-v9.
//
// Behavior (Kafka's ReplicaManager.fetchOffset, Partition
// fetchOffsetForTimestamp, UnifiedLog.fetchOffsetByTimestamp; the rule
// table is in the package doc):
//   - The leader epoch given (v4+) is, except for LATEST, the lineage's
//     epoch at the offset answered (LeaderEpochFileCache.epochForOffset)
//     after the lineage is trimmed to the log start offset
//     (truncateFromStart), -1 when the lineage starts after it.
//   - EARLIEST (-2): the log start offset. EARLIEST_LOCAL (-4): the local
//     log start offset, never below the log start offset. LATEST (-1): the
//     high watermark (read_uncommitted) or last stable offset
//     (read_committed) with the latest epoch. None of them is bounded.
//   - LATEST_TIERED (-5): the highest tiered offset, or offset -1 and
//     epoch -1 when nothing is tiered. A timestamp >= 0: the first offset
//     at or after the log start offset whose record timestamp is at or
//     after it. MAX_TIMESTAMP (-3): the first record with the largest
//     timestamp up to the high watermark. Any of these, when nothing is
//     found or the offset is at or past the end the isolation level
//     allows, is answered offset -1, timestamp -1, epoch -1 and no error,
//     as Kafka does.
//   - A negative timestamp that is unknown, or newer than the request's
//     version allows, gets UNSUPPORTED_VERSION for that partition. A
//     partition named twice gets INVALID_REQUEST (v1+).
//   - The isolation level applies to consumers (replica id -1); for any
//     other replica id the end is the high watermark too, since tierd
//     serves nothing past it.
//   - v4+: current_leader_epoch is checked (FENCED_LEADER_EPOCH,
//     UNKNOWN_LEADER_EPOCH) and the answer's leader epoch is given.
//   - v0 (old_style_offsets): LATEST gives [high watermark], EARLIEST [log
//     start offset], max_num_offsets permitting; a timestamp gives the
//     offset found for it, or [high watermark] when every record is
//     older. Kafka answers v0 from segment file times, which a log served
//     from object storage does not have.
func (s *Server) handleListOffsets(ctx context.Context, c *conn, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	iso := ReadUncommitted
	if req.Version >= 2 && req.IsolationLevel == 1 && req.ReplicaID == -1 {
		iso = ReadCommitted
	}
	count := map[TopicPartition]int{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			count[TopicPartition{t.Topic, p.Partition}]++
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		code := c.topicCode(kafkaacl.OpDescribe, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			tp := TopicPartition{t.Topic, p.Partition}
			switch {
			case code != 0:
				rp.ErrorCode = code
			case req.Version == 0:
				s.listOffsetV0(ctx, tp, p, &rp)
			case count[tp] > 1:
				rp.ErrorCode = kerr.InvalidRequest.Code
			case p.Timestamp < 0 && (tsMinVersion[p.Timestamp] == 0 || req.Version < tsMinVersion[p.Timestamp]):
				rp.ErrorCode = kerr.UnsupportedVersion.Code
			default:
				s.listOffset(ctx, tp, p, iso, req.Version, &rp)
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (s *Server) listOffset(ctx context.Context, tp TopicPartition, p kmsg.ListOffsetsRequestTopicPartition, iso Isolation,
	version int16, rp *kmsg.ListOffsetsResponseTopicPartition) {
	off, err := s.log.Offsets(ctx, tp)
	if err != nil {
		rp.ErrorCode = errorCode(err, -1)
		return
	}
	if version >= 4 {
		if rp.ErrorCode = epochCode(p.CurrentLeaderEpoch, off.LeaderEpoch); rp.ErrorCode != 0 {
			return
		}
	}
	end := off.HighWatermark
	if iso == ReadCommitted {
		end = off.LastStableOffset
	}
	var (
		at      TimestampOffset
		found   = true
		bounded = true // Partition.fetchOffsetForTimestamp's lastFetchableOffset applies
	)
	switch p.Timestamp {
	case tsEarliest:
		at, bounded = TimestampOffset{off.LogStartOffset, -1}, false
	case tsEarliestLoc:
		// Kafka keeps the local log start at or above the log start
		// (UnifiedLog.maybeIncrementLogStartOffset).
		at, bounded = TimestampOffset{max(off.LocalLogStartOffset, off.LogStartOffset), -1}, false
	case tsLatest:
		at, bounded = TimestampOffset{end, -1}, false
	case tsLatestTiered:
		at = TimestampOffset{off.HighestTieredOffset, -1}
	case tsMax:
		at, found, err = s.log.MaxTimestamp(ctx, tp, iso)
	default:
		at, found, err = s.log.OffsetForTimestamp(ctx, tp, p.Timestamp, iso)
	}
	if err != nil {
		rp.ErrorCode = errorCode(err, -1)
		return
	}
	if !found || (bounded && at.Offset >= end) {
		return // offset -1, timestamp -1, epoch -1, no error (ReplicaManager.fetchOffset)
	}
	rp.Offset, rp.Timestamp = at.Offset, at.Timestamp
	if version < 4 || at.Offset < 0 { // LATEST_TIERED with nothing tiered: epoch -1
		return
	}
	if p.Timestamp == tsLatest {
		rp.LeaderEpoch = off.LeaderEpoch
		return
	}
	epochs, err := s.log.LeaderEpochs(ctx, tp)
	if err != nil {
		rp.ErrorCode, rp.Offset, rp.Timestamp = errorCode(err, -1), -1, -1
		return
	}
	rp.LeaderEpoch = epochForOffset(truncateFromStart(epochs, off.LogStartOffset), at.Offset)
}

func (s *Server) listOffsetV0(ctx context.Context, tp TopicPartition, p kmsg.ListOffsetsRequestTopicPartition,
	rp *kmsg.ListOffsetsResponseTopicPartition) {
	if p.Timestamp < tsEarliest {
		rp.ErrorCode = kerr.UnsupportedVersion.Code
		return
	}
	off, err := s.log.Offsets(ctx, tp)
	if err != nil {
		rp.ErrorCode = errorCode(err, -1)
		return
	}
	var o int64
	switch p.Timestamp {
	case tsLatest:
		o = off.HighWatermark
	case tsEarliest:
		o = off.LogStartOffset
	default:
		at, found, err := s.log.OffsetForTimestamp(ctx, tp, p.Timestamp, ReadUncommitted)
		if err != nil {
			rp.ErrorCode = errorCode(err, -1)
			return
		}
		o = off.HighWatermark
		if found && at.Offset < o {
			o = at.Offset
		}
	}
	rp.OldStyleOffsets = []int64{}
	if p.MaxNumOffsets > 0 {
		rp.OldStyleOffsets = append(rp.OldStyleOffsets, o)
	}
}
