package logview

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/locallog"
	"github.com/tierd/tierd/remoteread"
)

// state is one partition's two tiers as of one call.
type state struct {
	tp        kafkalog.TopicPartition
	remote    remotelog.PartitionOffsets
	hasRemote bool // something is tiered: [remote.LogStartOffset, remote.HighestTieredOffset]
	local     *locallog.Partition
	lo        locallog.Offsets
	offs      listener.Offsets
}

func key(tp listener.TopicPartition) kafkalog.TopicPartition {
	return kafkalog.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
}

// state reads both tiers' offsets and joins them.
func (v *View) state(ctx context.Context, ltp listener.TopicPartition) (*state, error) {
	if ltp.Topic == "" || ltp.Partition < 0 {
		return nil, fmt.Errorf("%w: %s", listener.ErrUnknownPartition, ltp)
	}
	st := &state{tp: key(ltp), local: v.localPartition(key(ltp))}
	roffs, rok, err := v.remote.RemoteOffsets(ctx, st.tp)
	if err != nil {
		return nil, fmt.Errorf("%w: remote offsets of %s: %v", listener.ErrUnavailable, ltp, err)
	}
	if rok && !v.sameIncarnation(st.local, roffs) {
		rok, roffs = false, remotelog.PartitionOffsets{}
	}
	st.remote = roffs
	st.hasRemote = rok && roffs.HighestTieredOffset >= roffs.LogStartOffset
	if st.local != nil {
		st.lo, err = st.local.Offsets()
		if errors.Is(err, locallog.ErrClosed) { // listed again meanwhile: take the new one
			if st.local = v.localPartition(st.tp); st.local != nil {
				st.lo, err = st.local.Offsets()
			} else if err = nil; !st.hasRemote {
				return nil, fmt.Errorf("%w: %s", listener.ErrUnknownPartition, ltp)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: local log of %s: %v", listener.ErrUnavailable, ltp, err)
		}
	} else if !st.hasRemote {
		return nil, fmt.Errorf("%w: %s", listener.ErrUnknownPartition, ltp)
	}
	o := listener.Offsets{HighestTieredOffset: -1, LeaderEpoch: -1}
	if rok {
		o.HighestTieredOffset = roffs.HighestTieredOffset
	}
	switch {
	case st.hasRemote:
		o.LogStartOffset = roffs.LogStartOffset
		o.HighWatermark = roffs.HighestTieredOffset + 1
	default:
		o.LogStartOffset = st.lo.LocalLogStartOffset
		if rok { // the log start offset may have moved past the oldest local segment
			o.LogStartOffset = max(o.LogStartOffset, roffs.LogStartOffset)
		}
	}
	o.LocalLogStartOffset = o.HighWatermark
	o.LastStableOffset = math.MaxInt64
	if st.local != nil {
		o.HighWatermark = max(o.HighWatermark, st.lo.HighWatermark)
		o.LocalLogStartOffset = st.lo.LocalLogStartOffset
		if st.lo.LocalLogStartOffset >= st.lo.HighWatermark { // no local batch served
			o.LocalLogStartOffset = o.HighWatermark
		}
		o.LastStableOffset = st.lo.LastStableOffset
	}
	o.LogStartOffset = min(o.LogStartOffset, o.HighWatermark)
	if lso, ok := v.checkpointedLogStart(st, o.HighWatermark); ok {
		o.LogStartOffset = max(o.LogStartOffset, lso)
	}
	// Kafka's last stable offset is never below the log start offset
	// (UnifiedLog.maybeIncrementFirstUnstableOffset) nor above the high
	// watermark.
	o.LastStableOffset = min(max(o.LastStableOffset, o.LogStartOffset), o.HighWatermark)
	if eps, err := v.epochLineage(ctx, st); err == nil && len(eps) > 0 {
		o.LeaderEpoch = eps[len(eps)-1].Epoch
	}
	st.offs = o
	return st, nil
}

// checkpointedLogStart returns, for a partition with nothing tiered, the
// log start offset the log dir's log-start-offset-checkpoint gives it (the
// broker writes it after delete-records and retention; for a tiered
// partition the copier moves the remote metadata's log start there on its
// next pass, and the remote tier's is used), when it is one Kafka could
// have written: at most hw (UnifiedLog.maybeIncrementLogStartOffset never
// passes the high watermark). A larger one (another cluster's file, a
// hand edit) is ignored with a warning, as the copier ignores it.
func (v *View) checkpointedLogStart(st *state, hw int64) (int64, bool) {
	if st.local == nil || st.hasRemote {
		return 0, false
	}
	v.mu.Lock()
	f := v.checkpointFor(filepath.Dir(st.local.Dir()), kafkalog.LogStartOffsetCheckpointFile)
	v.mu.Unlock()
	lso, ok := f.get(st.tp)
	if !ok {
		return 0, false
	}
	if lso > hw {
		v.mu.Lock()
		v.warnOnce(fmt.Sprintf("lso:%s:%d", st.tp, lso), "log-start-offset-checkpoint gives a log start offset past the high watermark; ignored",
			"partition", st.tp, "log_start_offset", lso, "high_watermark", hw)
		v.mu.Unlock()
		return 0, false
	}
	return lso, true
}

// Offsets implements listener.Log.
func (v *View) Offsets(ctx context.Context, tp listener.TopicPartition) (listener.Offsets, error) {
	st, err := v.state(ctx, tp)
	if err != nil {
		return listener.Offsets{}, err
	}
	return st.offs, nil
}

// limit is the first offset a reader at iso may not see.
func (st *state) limit(iso listener.Isolation) int64 {
	if iso == listener.ReadCommitted {
		return st.offs.LastStableOffset
	}
	return st.offs.HighWatermark
}

// Read implements listener.Log.
func (v *View) Read(ctx context.Context, tp listener.TopicPartition, offset int64, maxBytes int, iso listener.Isolation) (listener.ReadResult, error) {
	var res listener.ReadResult
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var st *state
		if st, err = v.state(ctx, tp); err != nil {
			return res, err
		}
		res, err = v.read(ctx, st, offset, maxBytes, iso)
		if !errors.Is(err, errRetry) {
			return res, err
		}
		// A local segment went away under the reader: list the dirs and
		// the offsets again (its copy is now in the remote metadata).
		v.forceRescan()
	}
	return res, fmt.Errorf("%w: %s offset %d: local segments kept vanishing under the read", listener.ErrUnavailable, tp, offset)
}

// errRetry says the tiers changed under a read: start over.
var errRetry = errors.New("logview: tiers changed under the read")

func (v *View) read(ctx context.Context, st *state, offset int64, maxBytes int, iso listener.Isolation) (listener.ReadResult, error) {
	res := listener.ReadResult{Offsets: st.offs}
	o := st.offs
	if offset < o.LogStartOffset || offset > o.HighWatermark {
		return res, &listener.OffsetOutOfRangeError{Offset: offset, LogStartOffset: o.LogStartOffset, HighWatermark: o.HighWatermark}
	}
	limit := st.limit(iso)
	if offset >= limit {
		return res, nil
	}
	data, err := v.readTiers(ctx, st, offset, maxBytes, limit)
	if err != nil {
		return res, err
	}
	res.Records = data
	if iso == listener.ReadCommitted && len(data) > 0 {
		end, err := lastOffset(data)
		if err != nil {
			return res, fmt.Errorf("%w: %s: %v", listener.ErrDataLoss, st.tp, err)
		}
		if res.Aborted, err = v.abortedTxns(ctx, st, offset, end+1); err != nil {
			return res, err
		}
	}
	return res, nil
}

// readTiers returns whole batches from offset below limit, from the tier
// that holds them.
func (v *View) readTiers(ctx context.Context, st *state, offset int64, maxBytes int, limit int64) ([]byte, error) {
	localStart := int64(math.MaxInt64)
	if st.local != nil {
		localStart = st.lo.LocalLogStartOffset
	}
	if offset >= localStart {
		data, err := st.local.Read(offset, maxBytes, limit)
		switch {
		case err == nil:
			return data, nil
		case errors.Is(err, locallog.ErrBelowLocalStart), errors.Is(err, locallog.ErrSegmentGone):
			if !st.hasRemote || offset > st.remote.HighestTieredOffset {
				return nil, errRetry // moved, or deleted and the copy not yet visible
			}
		case errors.Is(err, kafkalog.ErrCorrupt) && st.hasRemote && offset <= st.remote.HighestTieredOffset:
			// The local segment went bad after its finished copy was made
			// (checked when copied): the copy holds these offsets intact.
			v.mu.Lock()
			v.warnOnce("corrupt-local:"+st.tp.String(), "local segment is corrupt; its offsets are read from their remote copy",
				"partition", st.tp.String(), "offset", offset, "err", err)
			v.mu.Unlock()
		default:
			return nil, localError(st.tp, offset, err)
		}
	}
	if !st.hasRemote || offset > st.remote.HighestTieredOffset {
		return nil, fmt.Errorf("%w: %s: offsets from %d to %d are neither tiered nor local (%v)", listener.ErrDataLoss, st.tp,
			offset, localStart-1, errNoData)
	}
	rr, err := v.remote.ReadRemote(ctx, st.tp, offset, maxBytes)
	if err != nil {
		return nil, remoteError(st.tp, offset, err)
	}
	if len(rr.Records) == 0 {
		// The rest of the tiered log was compacted away: the next batch
		// is the first local one.
		if st.local == nil || rr.Next >= limit {
			return nil, nil
		}
		return v.readTiers(ctx, st, max(rr.Next, localStart), maxBytes, limit)
	}
	return trimTo(rr.Records, limit)
}

// trimTo drops the batches whose last offset is at or past limit (a
// transaction still open bounds read_committed below a tiered offset).
func trimTo(data []byte, limit int64) ([]byte, error) {
	pos := 0
	for pos < len(data) {
		b, err := batch.ParseHeader(data[pos:], int64(pos))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", listener.ErrDataLoss, err)
		}
		if b.LastOffset >= limit {
			break
		}
		pos += int(b.Size)
	}
	return data[:pos], nil
}

// lastOffset returns the last offset of the last batch in data.
func lastOffset(data []byte) (int64, error) {
	last := int64(-1)
	for pos := 0; pos < len(data); {
		b, err := batch.ParseHeader(data[pos:], int64(pos))
		if err != nil {
			return 0, err
		}
		last = b.LastOffset
		pos += int(b.Size)
	}
	return last, nil
}

// abortedTxns collects, as Kafka does, the aborted transactions whose
// range overlaps [from, upper): from the transaction indexes of the
// segments at and after from, remote then local (the index entry sits in
// the segment of the abort marker).
func (v *View) abortedTxns(ctx context.Context, st *state, from, upper int64) ([]listener.AbortedTxn, error) {
	var all []index.AbortedTxn
	if st.hasRemote && from <= st.remote.HighestTieredOffset {
		r, err := v.remote.RemoteAbortedTxns(ctx, st.tp, from, upper)
		if err != nil {
			return nil, remoteError(st.tp, from, err)
		}
		all = append(all, r...)
	}
	if st.local != nil {
		l, err := st.local.AbortedTxns(from, upper)
		if err != nil {
			return nil, localError(st.tp, from, err)
		}
		all = append(all, l...)
	}
	seen := map[index.AbortedTxn]bool{}
	var out []listener.AbortedTxn
	for _, t := range all {
		if t.LastOffset < from || t.FirstOffset >= upper || seen[t] {
			continue
		}
		seen[t] = true // a segment both tiered and still local lists it twice
		out = append(out, listener.AbortedTxn{ProducerID: t.ProducerID, FirstOffset: t.FirstOffset})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	return out, nil
}

// remoteError maps the remote tier's error classes to the listener's.
func remoteError(tp kafkalog.TopicPartition, offset int64, err error) error {
	var re *remoteread.RangeError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &re):
		// Retention moved the log start offset after the offsets were
		// read: answer with the new range.
		return &listener.OffsetOutOfRangeError{Offset: offset, LogStartOffset: re.LogStartOffset, HighWatermark: re.HighestTieredOffset + 1}
	case errors.Is(err, remoteread.ErrNotTiered):
		return fmt.Errorf("%w: %s: %v", listener.ErrUnknownPartition, tp, err)
	case errors.Is(err, remoteread.ErrDataLoss):
		return fmt.Errorf("%w: %s offset %d: %v", listener.ErrDataLoss, tp, offset, err)
	}
	return fmt.Errorf("%w: %s offset %d: object store: %v", listener.ErrUnavailable, tp, offset, err)
}

// localError maps a local read failure.
func localError(tp kafkalog.TopicPartition, offset int64, err error) error {
	var oor *locallog.OffsetOutOfRangeError
	switch {
	case errors.As(err, &oor), errors.Is(err, locallog.ErrClosed):
		return errRetry // the log moved on between the offsets and the read, or was listed again
	case errors.Is(err, kafkalog.ErrCorrupt):
		return fmt.Errorf("%w: %s offset %d: %v", listener.ErrDataLoss, tp, offset, err)
	}
	return fmt.Errorf("%w: %s offset %d: local log: %v", listener.ErrUnavailable, tp, offset, err)
}
