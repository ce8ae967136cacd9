package listener

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkaacl"
)

// handleOffsetForLeaderEpoch answers OffsetForLeaderEpoch v0-v4, which
// consumers send to check their position after a leader change (KIP-320).
//
// Behavior (Kafka's Partition.lastOffsetForLeaderEpoch and
// LeaderEpochFileCache.endOffsetFor over the Log's lineage trimmed to the
// log start offset as truncateFromStart trims it, the end of the log
// being the high watermark; the package doc's "Offsets" table):
//   - The requested epoch is the latest: that epoch and the high
//     watermark.
//   - Otherwise the largest epoch at or below the requested one, ending
//     where the next epoch starts.
//   - Below the first epoch: the requested epoch and the first epoch's
//     start offset, which is the log start offset when the lineage began
//     before it (Kafka's answer, so a reader moves to the log start).
//   - Epoch -1, above the latest, or an empty lineage (a log of magic 0/1
//     only): epoch -1 and end offset -1 (UNDEFINED), no error.
//   - v2+: current_leader_epoch is checked as for Fetch. Consumers
//     (replica id -1, v3+) and others get the same answers.
//   - Log errors map as in errorCode: unknown partitions get
//     UNKNOWN_TOPIC_OR_PARTITION, storage failures KAFKA_STORAGE_ERROR.
func (s *Server) handleOffsetForLeaderEpoch(ctx context.Context, c *conn, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		code := c.topicCode(kafkaacl.OpDescribe, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			if code != 0 {
				rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = code, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			s.epochEnd(ctx, TopicPartition{t.Topic, p.Partition}, p, req.Version, &rp)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (s *Server) epochEnd(ctx context.Context, tp TopicPartition, p kmsg.OffsetForLeaderEpochRequestTopicPartition,
	version int16, rp *kmsg.OffsetForLeaderEpochResponseTopicPartition) {
	off, err := s.log.Offsets(ctx, tp)
	if err != nil {
		rp.ErrorCode = errorCode(err, -1)
		return
	}
	if version >= 2 {
		if rp.ErrorCode = epochCode(p.CurrentLeaderEpoch, off.LeaderEpoch); rp.ErrorCode != 0 {
			return
		}
	}
	epochs, err := s.log.LeaderEpochs(ctx, tp)
	if err != nil {
		rp.ErrorCode = errorCode(err, -1)
		return
	}
	epochs = truncateFromStart(epochs, off.LogStartOffset)
	rp.LeaderEpoch, rp.EndOffset = endOffsetFor(epochs, p.LeaderEpoch, off.HighWatermark)
}

// truncateFromStart is the lineage as Kafka's leader-epoch cache holds it
// once the log start offset is logStart
// (LeaderEpochFileCache.truncateFromStart, called from
// UnifiedLog.maybeIncrementLogStartOffset on retention and delete-records):
// the entries starting at or below logStart are dropped, and the last of
// them comes back starting at logStart. A lineage starting after logStart
// is returned as it is. The result is a new slice.
func truncateFromStart(epochs []EpochEntry, logStart int64) []EpochEntry {
	i := 0
	for i < len(epochs) && epochs[i].StartOffset <= logStart {
		i++
	}
	out := make([]EpochEntry, 0, len(epochs)-i+1)
	if i > 0 {
		out = append(out, EpochEntry{Epoch: epochs[i-1].Epoch, StartOffset: logStart})
	}
	return append(out, epochs[i:]...)
}

// epochForOffset is LeaderEpochFileCache.epochForOffset: the epoch of the
// first entry starting exactly at offset, else of the last entry starting
// below it; -1 when the lineage starts after offset.
func epochForOffset(epochs []EpochEntry, offset int64) int32 {
	e := int32(-1)
	for _, en := range epochs {
		switch {
		case en.StartOffset == offset:
			return en.Epoch
		case en.StartOffset > offset:
			return e
		}
		e = en.Epoch
	}
	return e
}

// endOffsetFor is LeaderEpochFileCache.endOffsetFor: the epoch and end
// offset answering a request for epoch, given the lineage (ascending) and
// the log end offset; (-1, -1) is UNDEFINED.
func endOffsetFor(epochs []EpochEntry, epoch int32, logEnd int64) (int32, int64) {
	if epoch < 0 || len(epochs) == 0 {
		return -1, -1
	}
	if epochs[len(epochs)-1].Epoch == epoch {
		return epoch, logEnd
	}
	// The first entry with a larger epoch, and the one before it.
	hi := -1
	for i, e := range epochs {
		if e.Epoch > epoch {
			hi = i
			break
		}
	}
	switch {
	case hi < 0:
		return -1, -1
	case hi == 0:
		return epoch, epochs[0].StartOffset
	}
	return epochs[hi-1].Epoch, epochs[hi].StartOffset
}
