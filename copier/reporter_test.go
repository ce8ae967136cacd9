package copier

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/remotelog"
)

// row is a metadata row of tp for the status tables.
func row(start, end, size int64, state remotelog.SegmentState, damaged string) remotelog.SegmentMetadata {
	return remotelog.SegmentMetadata{StartOffset: start, EndOffset: end, SizeInBytes: size, State: state, Damaged: damaged, EventTimestampMs: 1000 + end}
}

// TestRemoteCounts: finished copies count as remote size, damaged ones
// are named, copies below the log start offset and STARTED deletions
// count as delete lag, and DELETE_SEGMENT_FINISHED rows count for
// nothing.
func TestRemoteCounts(t *testing.T) {
	cases := []struct {
		name                        string
		rows                        []remotelog.SegmentMetadata
		offs                        remotelog.PartitionOffsets
		fin, remote, lagSegs, rowsN int
		damagedN                    int
		remoteBytes, lagBytes, last int64
		damaged                     string
	}{
		{name: "none", offs: remotelog.PartitionOffsets{LogStartOffset: -1, HighestTieredOffset: -1}, last: -1},
		{name: "finished", rows: []remotelog.SegmentMetadata{row(0, 9, 100, remotelog.CopySegmentFinished, ""), row(10, 19, 200, remotelog.CopySegmentFinished, "")},
			offs: remotelog.PartitionOffsets{LogStartOffset: 0, HighestTieredOffset: 19}, fin: 2, remote: 2, rowsN: 2, remoteBytes: 300, last: 1019},
		{name: "below the log start offset", rows: []remotelog.SegmentMetadata{row(0, 9, 100, remotelog.CopySegmentFinished, ""), row(10, 19, 200, remotelog.CopySegmentFinished, "")},
			offs: remotelog.PartitionOffsets{LogStartOffset: 10, HighestTieredOffset: 19}, fin: 2, remote: 2, rowsN: 2, remoteBytes: 300, lagSegs: 1, lagBytes: 100, last: 1019},
		{name: "deletions", rows: []remotelog.SegmentMetadata{row(0, 9, 100, remotelog.DeleteSegmentFinished, ""), row(10, 19, 200, remotelog.DeleteSegmentStarted, ""),
			row(20, 29, 400, remotelog.CopySegmentStarted, "")},
			offs: remotelog.PartitionOffsets{LogStartOffset: 20, HighestTieredOffset: 19}, rowsN: 2, lagSegs: 1, lagBytes: 200, last: -1},
		{name: "damaged: the first is named", rows: []remotelog.SegmentMetadata{row(0, 9, 100, remotelog.CopySegmentFinished, "gone"), row(10, 19, 200, remotelog.CopySegmentFinished, "lost")},
			offs: remotelog.PartitionOffsets{LogStartOffset: 0, HighestTieredOffset: 19}, fin: 2, remote: 2, rowsN: 2, remoteBytes: 300, last: 1019, damaged: "base offset 0: gone", damagedN: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := baseStatus(remotelog.TopicPartition{Topic: "t", Partition: 0}, "", 0)
			fin := remoteCounts(&st, tc.rows, tc.offs)
			if len(fin) != tc.fin || st.RemoteSegments != tc.remote || st.RemoteBytes != tc.remoteBytes || st.MetadataRows != tc.rowsN ||
				st.DeleteLagSegments != tc.lagSegs || st.DeleteLagBytes != tc.lagBytes || st.LastCopyMs != tc.last || st.Damaged != tc.damaged || st.DamagedCopies != tc.damagedN ||
				st.LogStartOffset != tc.offs.LogStartOffset || st.HighestTieredOffset != tc.offs.HighestTieredOffset {
				t.Errorf("fin %d, status %+v", len(fin), st)
			}
		})
	}
}

// TestPartitionStatusOf: the reason a partition waits, in order of
// precedence (the pass's note, the error that stopped the copy, the
// checkpoint, the high watermark, the cleaner, the next pass), and the
// counts and sentences that come with it.
func TestPartitionStatusOf(t *testing.T) {
	tp := remotelog.TopicPartition{Topic: "t", Partition: 3}
	segs := []localSegment{{base: 0, end: 9, size: 100}, {base: 10, end: 19, size: 200}, {base: 20, end: -1, size: 50}}
	copied := []remotelog.SegmentMetadata{row(0, 9, 100, remotelog.CopySegmentFinished, ""), row(10, 19, 200, remotelog.CopySegmentFinished, "")}
	tiered := remotelog.PartitionOffsets{LogStartOffset: 0, HighestTieredOffset: 19}
	unknown := remotelog.PartitionOffsets{LogStartOffset: -1, HighestTieredOffset: -1}
	committed := func(p *partition) { p.hw, p.hwKnown, p.inCheckpoint, p.copyDone = 100, true, true, true }
	storeDown := func() (remotelog.WaitReason, error) {
		return remotelog.WaitStoreUnreachable, errors.New("probe timed out")
	}
	cases := []struct {
		name    string
		p       func(p *partition)
		err     error
		rows    []remotelog.SegmentMetadata
		offs    remotelog.PartitionOffsets
		wait    *waitNote
		env     func() (remotelog.WaitReason, error)
		retain  string
		state   remotelog.TierState
		reason  remotelog.WaitReason
		detail  string // the detail contains it
		pending int
		bytes   int64
	}{
		{name: "up to date", p: committed, rows: copied, offs: tiered, state: remotelog.TierUpToDate,
			detail: "every rolled segment has a finished copy; the active segment (base offset 20) is copied once the broker rolls it"},
		{name: "no rolled segment yet", p: func(p *partition) { committed(p); p.segs = segs[2:] }, offs: unknown, state: remotelog.TierUpToDate,
			detail: "no rolled segment yet; the active segment (base offset 20)"},
		{name: "next pass", p: committed, offs: unknown, state: remotelog.TierWaiting, reason: remotelog.WaitNextPass,
			detail: "2 rolled segments (300 bytes) wait for the next pass", pending: 2, bytes: 300},
		{name: "high watermark", p: func(p *partition) { committed(p); p.hw = 15 }, rows: copied[:1], offs: remotelog.PartitionOffsets{LogStartOffset: 0, HighestTieredOffset: 9},
			state: remotelog.TierWaiting, reason: remotelog.WaitHighWatermark, detail: "the high watermark 15 (replication-offset-checkpoint) does not pass the last offset 19 of the next segment (base offset 10)",
			pending: 1, bytes: 200},
		{name: "not in the checkpoint", p: func(p *partition) { committed(p); p.hw, p.inCheckpoint = 0, false }, offs: unknown,
			state: remotelog.TierWaiting, reason: remotelog.WaitNotInCheckpoint, detail: "no entry in the log dir's", pending: 2, bytes: 300},
		{name: "the pass's note wins", p: func(p *partition) { committed(p); p.hw = 0 }, err: errors.New("lease"), offs: unknown,
			wait: &waitNote{reason: remotelog.WaitLeaseHeld, detail: "another tierd holds it"}, state: remotelog.TierWaiting, reason: remotelog.WaitLeaseHeld,
			detail: "another tierd holds it", pending: 2, bytes: 300},
		{name: "copy failed", p: func(p *partition) { committed(p); p.copyErr = errors.New("boom") }, err: errors.New("boom"), offs: unknown,
			state: remotelog.TierWaiting, reason: remotelog.WaitCopyFailed, detail: "the pass failed before segment 0 was copied (boom)", pending: 2, bytes: 300},
		{name: "copy failed, the gate passes", p: func(p *partition) { committed(p); p.copyErr = errors.New("boom") }, err: errors.New("boom"), offs: unknown,
			env:   func() (remotelog.WaitReason, error) { return "", nil },
			state: remotelog.TierWaiting, reason: remotelog.WaitCopyFailed, detail: "the pass failed before segment 0 was copied (boom)", pending: 2, bytes: 300},
		{name: "copy failed while the store is down", p: func(p *partition) { committed(p); p.copyErr = errors.New("boom") }, err: errors.New("boom"), offs: unknown,
			env: storeDown, state: remotelog.TierWaiting, reason: remotelog.WaitStoreUnreachable,
			detail: "the object store does not answer tierd's probe (probe timed out); the copy failed (boom)", pending: 2, bytes: 300},
		{name: "stopped before copying", p: func(p *partition) { committed(p); p.copyDone = false }, err: context.Canceled, offs: unknown,
			state: remotelog.TierWaiting, reason: remotelog.WaitNextPass, detail: "the pass was cancelled (tierd is stopping) before segment 0 was copied", pending: 2, bytes: 300},
		{name: "an error after the copy", p: committed, err: errors.New("retention"), rows: copied, offs: tiered, state: remotelog.TierUpToDate,
			detail: "every rolled segment has a finished copy"},
		{name: "not cleaned", p: func(p *partition) { committed(p); p.policy = topics.CleanupPolicy{Compact: true} }, offs: unknown,
			state: remotelog.TierWaiting, reason: remotelog.WaitNotCleaned, detail: "the cleaner has written none there yet", pending: 2, bytes: 300},
		{name: "damaged copy copied again", p: committed, rows: []remotelog.SegmentMetadata{row(0, 9, 100, remotelog.CopySegmentFinished, "gone"), copied[1]}, offs: tiered,
			state: remotelog.TierWaiting, reason: remotelog.WaitNextPass, detail: "1 rolled segments (100 bytes)", pending: 1, bytes: 100},
		{name: "below the log start offset", p: committed, offs: remotelog.PartitionOffsets{LogStartOffset: 10, HighestTieredOffset: 9},
			state: remotelog.TierWaiting, reason: remotelog.WaitNextPass, pending: 1, bytes: 200},
		{name: "retention waits, broker-owned", p: func(p *partition) { committed(p); p.brokerOwned, p.ownedWhy = true, "broker_owned: true" }, rows: copied, offs: tiered,
			retain: "retention waits until then", state: remotelog.TierUpToDate,
			detail: "rolls it; retention waits until then; its local files are the broker's (broker_owned: true): tierd deletes none of them"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &partition{tp: tp, dir: "/logs/t-3", segs: segs, hw: -1, brokerLSO: -1, leaderEpoch: -1}
			tc.p(p)
			st := partitionStatusOf(statusInputs{p: p, err: tc.err, rows: tc.rows, offs: tc.offs, wait: tc.wait, env: tc.env, retention: tc.retain, nowMs: 7})
			if st.State != tc.state || st.Reason != tc.reason || !strings.Contains(st.Detail, tc.detail) || st.PendingSegments != tc.pending || st.PendingBytes != tc.bytes {
				t.Errorf("got %s/%s %d segments %d bytes: %q\nwant %s/%s %d segments %d bytes, detail with %q",
					st.State, st.Reason, st.PendingSegments, st.PendingBytes, st.Detail, tc.state, tc.reason, tc.pending, tc.bytes, tc.detail)
			}
			if st.LocalSegments != 3 && len(p.segs) == 3 || st.UpdatedMs != 7 || st.Dir != p.dir {
				t.Errorf("counts: %+v", st)
			}
			if (tc.err != nil) != (st.Error != "") {
				t.Errorf("error %q for %v", st.Error, tc.err)
			}
		})
	}
}

// TestFailedPartition: a wait on the environment fails the pass even
// without an error; an error fails it unless the partition waits on
// something tierd cannot change.
func TestFailedPartition(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		state  remotelog.TierState
		reason remotelog.WaitReason
		err    error
		want   bool
	}{
		{remotelog.TierUpToDate, "", nil, false},
		{remotelog.TierUpToDate, "", boom, true},
		{remotelog.TierWaiting, remotelog.WaitNextPass, boom, true},
		{remotelog.TierWaiting, remotelog.WaitHeld, boom, false},
		{remotelog.TierWaiting, remotelog.WaitLeaseHeld, boom, false},
		{remotelog.TierWaiting, remotelog.WaitClusterUnreachable, nil, true},
		{remotelog.TierWaiting, remotelog.WaitStoreUnreachable, nil, true},
		{remotelog.TierWaiting, remotelog.WaitHighWatermark, nil, false},
	}
	for _, tc := range cases {
		if got := failedPartition(remotelog.PartitionStatus{State: tc.state, Reason: tc.reason}, tc.err); got != tc.want {
			t.Errorf("%s/%s err %v: failed %v, want %v", tc.state, tc.reason, tc.err, got, tc.want)
		}
	}
}

// fakeStatusStore is a statusStore over fixed rows.
type fakeStatusStore struct {
	offs map[remotelog.TopicPartition]remotelog.PartitionOffsets
	rows map[remotelog.TopicPartition][]remotelog.SegmentMetadata
}

func (f *fakeStatusStore) Offsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error) {
	o, ok := f.offs[tp]
	return o, ok, nil
}

func (f *fakeStatusStore) Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	return f.rows[tp], nil
}

func (f *fakeStatusStore) Partitions() ([]remotelog.TopicPartition, error) {
	var out []remotelog.TopicPartition
	for tp := range f.offs {
		out = append(out, tp)
	}
	return out, nil
}

// TestReporterPass: through its narrow store, a reporter's pass records
// the partitions it synced, the waits of partitions it did not, and the
// store's partitions without a directory as remote only (internal
// topics not); the gate's verdict overrides every status at once; the
// pass timestamps follow failed.
func TestReporterPass(t *testing.T) {
	live, held, remote, internal := remotelog.TopicPartition{Topic: "a", Partition: 0}, remotelog.TopicPartition{Topic: "b", Partition: 0},
		remotelog.TopicPartition{Topic: "c", Partition: 1}, remotelog.TopicPartition{Topic: "__consumer_offsets", Partition: 0}
	store := &fakeStatusStore{offs: map[remotelog.TopicPartition]remotelog.PartitionOffsets{
		remote: {LogStartOffset: 0, HighestTieredOffset: 9}, internal: {LogStartOffset: 0, HighestTieredOffset: -1}},
		rows: map[remotelog.TopicPartition][]remotelog.SegmentMetadata{remote: {row(0, 9, 100, remotelog.CopySegmentFinished, "")}}}
	now := time.UnixMilli(5000)
	var gate error
	r := newReporter()
	r.bind(reporterDeps{log: slog.New(slog.DiscardHandler), now: func() time.Time { return now }, store: store,
		env: func() (remotelog.WaitReason, error) {
			if gate != nil {
				return remotelog.WaitMetadataUnwritable, gate
			}
			return "", nil
		},
		tiered: (&Copier{}).tiered})
	r.register(prometheus.NewRegistry())

	r.beginPass()
	r.waitHeld(held, remotelog.WaitHeld, heldDuplicateDir, "in two log dirs")
	r.wait(held, remotelog.WaitNextPass, "a later reason does not replace the first")
	p := &partition{tp: live, dir: "/logs/a-0", segs: []localSegment{{base: 0, end: -1}}, hw: 0, hwKnown: true, inCheckpoint: true, copyDone: true}
	if st := r.partitionDone(p, 0, nil, ""); st.State != remotelog.TierUpToDate {
		t.Fatalf("synced partition: %+v", st)
	}
	r.endPass([]*partition{p}, true)

	got := map[remotelog.TopicPartition]remotelog.PartitionStatus{}
	s := r.status()
	for _, st := range s.Partitions {
		got[remotelog.TopicPartition{Topic: st.Topic, Partition: st.Partition}] = st
	}
	if len(got) != 3 || got[live].State != remotelog.TierUpToDate || got[held].Reason != remotelog.WaitHeld || got[held].Held != heldDuplicateDir ||
		got[remote].State != remotelog.TierRemoteOnly || got[remote].RemoteSegments != 1 || got[remote].RemoteBytes != 100 {
		t.Fatalf("statuses: %+v", s.Partitions)
	}
	if s.Passes != 1 || s.LastPassMs != 5000 || s.LastSuccessMs != -1 {
		t.Errorf("failed pass: passes %d, last %d, last success %d", s.Passes, s.LastPassMs, s.LastSuccessMs)
	}

	now = time.UnixMilli(6000)
	r.beginPass()
	r.endPass(nil, false)
	if s := r.status(); s.Passes != 2 || s.LastSuccessMs != 6000 || len(s.Partitions) != 1 || s.Partitions[0].Topic != "c" {
		t.Errorf("second pass, nothing live: %+v", s)
	}

	gate = errors.New("read-only file system")
	for _, st := range r.status().Partitions {
		if st.Reason != remotelog.WaitMetadataUnwritable || st.Error != gate.Error() || !strings.Contains(st.Detail, "the metadata dir takes no writes") {
			t.Errorf("while the gate is shut: %+v", st)
		}
	}
}
