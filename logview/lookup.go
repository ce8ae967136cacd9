package logview

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/tierd/tierd/internal/kafkalog/epoch"
	"github.com/tierd/tierd/listener"
)

// OffsetForTimestamp implements listener.Log: the tiered log first, then
// the local one (Kafka's order for a tiered partition), below the
// isolation level's bound.
func (v *View) OffsetForTimestamp(ctx context.Context, tp listener.TopicPartition, ts int64, iso listener.Isolation) (listener.TimestampOffset, bool, error) {
	st, err := v.state(ctx, tp)
	if err != nil {
		return listener.TimestampOffset{}, false, err
	}
	limit := st.limit(iso)
	if st.hasRemote {
		off, t, found, err := v.remote.RemoteOffsetForTimestamp(ctx, st.tp, ts)
		if err != nil {
			return listener.TimestampOffset{}, false, remoteError(st.tp, -1, err)
		}
		if found {
			if off >= limit {
				return listener.TimestampOffset{}, false, nil
			}
			return listener.TimestampOffset{Offset: off, Timestamp: t}, true, nil
		}
	}
	if st.local == nil {
		return listener.TimestampOffset{}, false, nil
	}
	off, t, found, err := st.local.OffsetForTimestamp(ts, max(st.offs.LogStartOffset, st.offs.LocalLogStartOffset), limit)
	if err != nil {
		return listener.TimestampOffset{}, false, localError(st.tp, -1, err)
	}
	return listener.TimestampOffset{Offset: off, Timestamp: t}, found, nil
}

// MaxTimestamp implements listener.Log as Kafka answers MAX_TIMESTAMP
// (UnifiedLog.fetchOffsetByTimestamp, then ReplicaManager.fetchOffset's
// lastFetchableOffset): the first record with the largest timestamp of
// the log from the log start offset to the high watermark, the larger of
// the two tiers' maxima and the tiered one on a tie (it comes first); not
// found when that record is at or past the isolation level's end (an open
// transaction's record under read_committed), never the largest below
// that end.
func (v *View) MaxTimestamp(ctx context.Context, tp listener.TopicPartition, iso listener.Isolation) (listener.TimestampOffset, bool, error) {
	st, err := v.state(ctx, tp)
	if err != nil {
		return listener.TimestampOffset{}, false, err
	}
	hw := st.offs.HighWatermark
	var best listener.TimestampOffset
	found := false
	if st.hasRemote {
		off, t, ok, err := v.remote.RemoteMaxTimestamp(ctx, st.tp)
		if err != nil {
			return best, false, remoteError(st.tp, -1, err)
		}
		if ok && off >= st.offs.LogStartOffset && off < hw {
			best, found = listener.TimestampOffset{Offset: off, Timestamp: t}, true
		}
	}
	if st.local != nil {
		off, t, ok, err := st.local.MaxTimestampFrom(st.offs.LogStartOffset, hw)
		if err != nil {
			return best, false, localError(st.tp, -1, err)
		}
		if ok && (!found || t > best.Timestamp) {
			best, found = listener.TimestampOffset{Offset: off, Timestamp: t}, true
		}
	}
	if found && best.Offset >= st.limit(iso) {
		return listener.TimestampOffset{}, false, nil
	}
	return best, found, nil
}

// LeaderEpochs implements listener.Log.
func (v *View) LeaderEpochs(ctx context.Context, tp listener.TopicPartition) ([]listener.EpochEntry, error) {
	st, err := v.state(ctx, tp)
	if err != nil {
		return nil, err
	}
	return v.epochLineage(ctx, st)
}

// epochLineage merges the copies' epochs with the local
// leader-epoch-checkpoint: per epoch the smallest start offset, ascending;
// an entry whose start offset is below an earlier epoch's is dropped (the
// checkpoint of a log truncated since). Cached for CacheTTL.
func (v *View) epochLineage(ctx context.Context, st *state) ([]listener.EpochEntry, error) {
	v.mu.Lock()
	c, ok := v.epochs[st.tp]
	v.mu.Unlock()
	if ok && time.Since(c.at) < v.cfg.CacheTTL {
		return c.entries, nil
	}
	var all []epoch.Entry
	if st.hasRemote {
		r, err := v.remote.RemoteLeaderEpochs(ctx, st.tp)
		if err != nil {
			return nil, remoteError(st.tp, -1, err)
		}
		all = append(all, r...)
	}
	if st.local != nil {
		l, err := st.local.LeaderEpochs()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: leader-epoch-checkpoint: %v", listener.ErrUnavailable, st.tp, err)
		}
		all = append(all, l...)
	}
	start := map[int32]int64{}
	for _, e := range all {
		if s, ok := start[e.Epoch]; !ok || e.StartOffset < s {
			start[e.Epoch] = e.StartOffset
		}
	}
	out := make([]listener.EpochEntry, 0, len(start))
	for ep, s := range start {
		out = append(out, listener.EpochEntry{Epoch: ep, StartOffset: s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Epoch < out[j].Epoch })
	kept := out[:0]
	for _, e := range out {
		if len(kept) > 0 && e.StartOffset < kept[len(kept)-1].StartOffset {
			continue
		}
		kept = append(kept, e)
	}
	v.mu.Lock()
	v.epochs[st.tp] = cachedEpochs{at: time.Now(), entries: kept}
	v.mu.Unlock()
	return kept, nil
}
