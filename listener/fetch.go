package listener

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkalog/batch"

	"github.com/tierd/tierd/internal/kafkaacl"
)

// fetchPart is one partition of a Fetch request being answered.
type fetchPart struct {
	tp       TopicPartition
	offset   int64
	maxBytes int32
	epoch    int32 // current_leader_epoch, -1 when not given
	rp       *kmsg.FetchResponseTopicPartition

	// As of the last read, for long polling: the end the isolation level
	// allows and the log start offset.
	end, start int64
}

// fetchKey names a partition as a Fetch request does: by topic name (v4-v12)
// or topic id (v13+; the other field is empty).
type fetchKey struct {
	topic string
	id    [16]byte
	p     int32
}

// fetchRound is the outcome of reading every partition once.
type fetchRound struct {
	bytes   int64
	failed  bool // a partition got an error other than "unknown partition"
	fenced  bool // a partition got FENCED_LEADER_EPOCH (v16 names the leader)
	waiting int  // partitions a long poll watches
}

// handleFetch answers Fetch v4-v16.
//
// Behavior (Kafka's KafkaApis.handleFetchRequest, ReplicaManager
// fetchMessages/readFromLog, DelayedFetch):
//   - Sessions are not kept (as a broker with no session cache slots): a
//     full fetch (session epoch 0 or -1, or v4-v6) is answered sessionless
//     with session id 0, forgotten topics ignored; an incremental one gets
//     FETCH_SESSION_ID_NOT_FOUND and no partitions, and clients fall back
//     to full fetches.
//   - v13+ name topics by id; an id the Log does not hold gets
//     UNKNOWN_TOPIC_ID.
//   - A partition named more than once is answered once, where it was
//     first named, from the position named last (Kafka's FetchRequest
//     keeps one entry per partition), so repeating a partition costs
//     nothing.
//   - Partitions are read in request order from the Log, byte for byte.
//     The response budget is max_bytes capped by fetch.max.bytes; each
//     partition reads up to min(partition_max_bytes, what is left). Until
//     a partition returns records, the first batch is returned even when
//     larger than both ("at least one batch"); after that, a partition
//     whose first batch does not fit returns none.
//   - When the records are fewer than min_bytes (at most max_bytes and
//     fetch.max.bytes, as Kafka caps it) and no partition failed,
//     the fetch waits up to max_wait_ms, checking the partitions' offsets
//     every fetch.poll.interval.ms and reading again when they move; it
//     answers early once min_bytes are there, or when the listener stops.
//     A client that closes its connection meanwhile ends the wait and
//     frees the connection at once, rather than holding both until
//     max_wait_ms.
//   - Each partition carries the high watermark, last stable offset, log
//     start offset, preferred read replica -1 and, for read_committed, the
//     aborted transactions of the range (an empty list when none; null for
//     read_uncommitted, as Kafka). OFFSET_OUT_OF_RANGE carries the log
//     start offset and high watermark; other errors -1. A partition
//     without records gets an empty record set, never a null one (Kafka
//     sends empty; librdkafka rejects null).
//   - current_leader_epoch (v9+) is checked (FENCED_LEADER_EPOCH,
//     UNKNOWN_LEADER_EPOCH); v16 adds the current leader and its endpoint.
//     last_fetched_epoch (followers only) is not checked.
//   - Fetch v4-v9 from a partition whose records hold zstd batches gets
//     UNSUPPORTED_COMPRESSION_TYPE (zstd needs v10, KIP-110).
//   - Any replica id is served as a consumer: nothing past the high
//     watermark.
func (s *Server) handleFetch(ctx context.Context, c *conn, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	start := time.Now()
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	var iso Isolation
	switch req.IsolationLevel {
	case 0:
		iso = ReadUncommitted
	case 1:
		iso = ReadCommitted
	default:
		return nil, &closeErr{reason: reasonMalformed, err: fmt.Errorf("%w: Fetch isolation level %d", errMalformed, req.IsolationLevel)}
	}
	if req.Version >= 7 && req.SessionEpoch != 0 && req.SessionEpoch != -1 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}
	// A partition named more than once is read once, at the position named
	// last, and answered where it was first named.
	last := map[fetchKey]*kmsg.FetchRequestTopicPartition{}
	for ti := range req.Topics {
		t := &req.Topics[ti]
		for pi := range t.Partitions {
			last[fetchKey{t.Topic, t.TopicID, t.Partitions[pi].Partition}] = &t.Partitions[pi]
		}
	}
	var parts []*fetchPart
	for _, t := range req.Topics {
		var named []kmsg.FetchRequestTopicPartition
		for _, p := range t.Partitions {
			k := fetchKey{t.Topic, t.TopicID, p.Partition}
			if lp, ok := last[k]; ok {
				named = append(named, *lp)
				delete(last, k)
			}
		}
		if len(named) == 0 && len(t.Partitions) > 0 {
			continue // every partition was named before
		}
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name, code := t.Topic, int16(0)
		if req.Version >= 13 {
			n, err := s.topics.name(ctx, t.TopicID)
			switch {
			case err != nil:
				code = errorCode(err, req.Version)
			case n == "":
				code = kerr.UnknownTopicID.Code
			}
			name = n
		}
		if code == 0 {
			code = c.topicCode(kafkaacl.OpRead, name)
		}
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(named))
		for i, p := range named {
			rp := &rt.Partitions[i]
			*rp = kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.HighWatermark, rp.RecordBatches = p.Partition, -1, []byte{}
			if code != 0 {
				rp.ErrorCode = code
				continue
			}
			parts = append(parts, &fetchPart{tp: TopicPartition{name, p.Partition}, offset: p.FetchOffset,
				maxBytes: p.PartitionMaxBytes, epoch: p.CurrentLeaderEpoch, rp: rp})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	// As Kafka (KafkaApis.handleFetchRequest), min_bytes is at most the
	// response budget: a fetch whose budget is full answers.
	req.MinBytes = min(req.MinBytes, req.MaxBytes, s.cfg.FetchMaxBytes)
	want := s.fetchWant(req, parts)
	limit, ok, err := s.reserveFetch(ctx, c, want, time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond)
	if err != nil {
		return nil, err
	}
	if !ok {
		// fetch.response.memory.bytes stayed taken for max_wait_ms: an
		// answer with every partition's offsets and no records, as a long
		// poll that found nothing; the client fetches again.
		s.fetchRound(ctx, req, parts, iso, 0, false)
		return resp, nil
	}
	round := s.fetchRound(ctx, req, parts, iso, limit, true)
	s.shrinkFetch(c, 2*round.bytes)
	if req.MaxWaitMillis > 0 && round.bytes < int64(req.MinBytes) && !round.failed && round.waiting > 0 {
		var err error
		if round, err = s.longPoll(ctx, c, req, parts, iso, start, round, want); err != nil {
			return nil, err
		}
	}
	if round.fenced && req.Version >= 16 {
		resp.Brokers = []kmsg.FetchResponseBroker{{NodeID: s.nodeID, Host: s.advHost, Port: s.advPort}}
	}
	return resp, nil
}

// longPoll waits for min_bytes (see handleFetch) and returns the last
// round read. Its error, a *closeErr, says the client closed the
// connection meanwhile: nobody is left to answer.
func (s *Server) longPoll(ctx context.Context, c *conn, req *kmsg.FetchRequest, parts []*fetchPart,
	iso Isolation, start time.Time, round fetchRound, want int64) (fetchRound, error) {
	deadline := time.NewTimer(time.Until(start.Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)))
	defer deadline.Stop()
	tick := time.NewTicker(s.cfg.pollInterval())
	defer tick.Stop()
	for {
		last := false
		select {
		case <-ctx.Done():
			return round, nil
		case <-c.stopping:
			return round, nil
		case <-tick.C:
		case <-deadline.C:
			last = true
		}
		if c.peerClosed() {
			return round, &closeErr{reason: reasonClient, err: fmt.Errorf("%w during a long-polling Fetch", errClientClosed)}
		}
		if s.moved(ctx, parts, iso) {
			// The Fetch memory for another round, or, when it is taken,
			// another try at the next tick.
			if limit, ok := s.growFetch(c, want); ok {
				round = s.fetchRound(ctx, req, parts, iso, limit, true)
				s.shrinkFetch(c, 2*round.bytes)
				if round.bytes >= int64(req.MinBytes) || round.failed || round.waiting == 0 {
					return round, nil
				}
			}
		}
		if last {
			return round, nil
		}
	}
}

// moved reports whether any watched partition's end or log start offset
// changed since it was read (or its offsets cannot be read).
func (s *Server) moved(ctx context.Context, parts []*fetchPart, iso Isolation) bool {
	for _, p := range parts {
		if p.rp.ErrorCode != 0 {
			continue
		}
		off, err := s.log.Offsets(ctx, p.tp)
		if err != nil || endFor(off, iso) != p.end || off.LogStartOffset != p.start {
			return true
		}
	}
	return false
}

func endFor(off Offsets, iso Isolation) int64 {
	if iso == ReadCommitted {
		return off.LastStableOffset
	}
	return off.HighWatermark
}

// fetchRound reads every partition once, within the response budget of
// limit record bytes (what reserveFetch granted); minOne false returns no
// records at all, only each partition's offsets and errors.
func (s *Server) fetchRound(ctx context.Context, req *kmsg.FetchRequest, parts []*fetchPart, iso Isolation, limit int64, minOne bool) fetchRound {
	var r fetchRound
	left := limit
	for _, p := range parts {
		budget := min(int64(p.maxBytes), left)
		n := s.readPart(ctx, p, max(budget, 0), minOne, iso, req.Version)
		switch code := p.rp.ErrorCode; code {
		case 0:
			r.waiting++
		case kerr.UnknownTopicOrPartition.Code:
		case kerr.FencedLeaderEpoch.Code:
			r.fenced, r.failed = true, true
		default:
			r.failed = true
		}
		if n > 0 {
			minOne = false
		}
		r.bytes += n
		left = max(left-n, 0)
	}
	return r
}

// readPart answers one partition and returns the bytes of records given.
func (s *Server) readPart(ctx context.Context, p *fetchPart, budget int64, minOne bool, iso Isolation, version int16) int64 {
	rp := p.rp
	*rp = kmsg.NewFetchResponseTopicPartition()
	// Records are never null: Kafka sends an empty record set, and
	// librdkafka rejects a null one.
	rp.Partition, rp.HighWatermark, rp.RecordBatches = p.tp.Partition, -1, []byte{}
	if !minOne && budget == 0 {
		// Nothing may be returned: check the request against the offsets.
		off, err := s.log.Offsets(ctx, p.tp)
		switch {
		case err != nil:
			s.partError(p, err, version)
		case s.fenced(p, off, version):
		case p.offset < off.LogStartOffset || p.offset > off.HighWatermark:
			s.partError(p, &OffsetOutOfRangeError{p.offset, off.LogStartOffset, off.HighWatermark}, version)
		default:
			s.partOffsets(p, off, iso, nil)
		}
		return 0
	}
	res, err := s.log.Read(ctx, p.tp, p.offset, int(min(budget, int64(maxInt))), iso)
	if err != nil {
		if p.epoch >= 0 && !errors.Is(err, ErrUnknownPartition) {
			if off, oerr := s.log.Offsets(ctx, p.tp); oerr == nil && s.fenced(p, off, version) {
				return 0
			}
		}
		s.partError(p, err, version)
		return 0
	}
	if s.fenced(p, res.Offsets, version) {
		return 0
	}
	recs := res.Records
	if recs == nil || (!minOne && int64(len(recs)) > budget) {
		recs = []byte{} // none, or the first batch does not fit: Kafka returns none
	}
	if version < 10 && hasZstd(recs) {
		rp.ErrorCode = kerr.UnsupportedCompressionType.Code
		return 0
	}
	s.partOffsets(p, res.Offsets, iso, res.Aborted)
	rp.RecordBatches = recs
	return int64(len(recs))
}

const maxInt = int(^uint(0) >> 1)

// fenced applies the current-leader-epoch check; on failure it answers
// the partition (v16: naming the current leader) and returns true.
func (s *Server) fenced(p *fetchPart, off Offsets, version int16) bool {
	if version < 9 {
		return false
	}
	code := epochCode(p.epoch, off.LeaderEpoch)
	if code == 0 {
		return false
	}
	p.rp.ErrorCode = code
	if version >= 16 && code == kerr.FencedLeaderEpoch.Code {
		p.rp.CurrentLeader.LeaderID, p.rp.CurrentLeader.LeaderEpoch = s.nodeID, off.LeaderEpoch
	}
	return true
}

// partOffsets fills a successful partition's offsets and remembers them
// for long polling.
func (s *Server) partOffsets(p *fetchPart, off Offsets, iso Isolation, aborted []AbortedTxn) {
	rp := p.rp
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = off.HighWatermark, off.LastStableOffset, off.LogStartOffset
	if iso == ReadCommitted {
		rp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(aborted))
		for _, a := range aborted {
			rp.AbortedTransactions = append(rp.AbortedTransactions,
				kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
	p.end, p.start = endFor(off, iso), off.LogStartOffset
}

// partError answers a partition with the code for err and logs failures
// of tierd's own making once per partition.
func (s *Server) partError(p *fetchPart, err error, version int16) {
	rp := p.rp
	rp.ErrorCode = errorCode(err, version)
	var oor *OffsetOutOfRangeError
	switch {
	case errors.As(err, &oor):
		rp.HighWatermark, rp.LogStartOffset = oor.HighWatermark, oor.LogStartOffset
	case errors.Is(err, ErrUnknownPartition), errors.Is(err, context.Canceled):
	default:
		if s.once.first("read_error/"+codeName(rp.ErrorCode), "", p.tp.String()) {
			s.logger.Error("Kafka Fetch read failed (logged once per partition and code)", "partition", p.tp.String(),
				"offset", p.offset, "code", codeName(rp.ErrorCode), "err", err)
		}
	}
}

// hasZstd reports whether records hold a zstd-compressed batch.
func hasZstd(recs []byte) bool {
	for pos := 0; pos < len(recs); {
		b, err := batch.ParseHeader(recs[pos:], int64(pos))
		if err != nil {
			return false
		}
		if b.Codec == batch.CodecZstd {
			return true
		}
		pos += int(b.Size)
	}
	return false
}
