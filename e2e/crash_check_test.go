package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rsm"
)

type crashTally struct{ kills, lost, orphans, unsafe, corrupt int }

// check verifies the invariants after a round and adds what it finds.
func (r *crashRig) check(resp *tierdpb.ListSegmentsResponse, tally *crashTally) {
	r.t.Helper()
	ctx := context.Background()
	lso, hw := resp.LogStartOffset, r.log.HighWatermark()
	// Every offset in [log start, high watermark) reads back unchanged.
	for off := lso; off < hw; {
		data, err := r.log.ReadContext(ctx, off, 1<<20)
		if err != nil || len(data) == 0 {
			// The daemon keeps running passes while this reads: remote
			// retention may have moved the log start offset past off since
			// resp was taken. Offsets below the log start offset it reports
			// now are retention's, not lost.
			if now := r.logStart(ctx); now > off {
				off = now
				continue
			}
			r.t.Errorf("offset %d unreadable: %v", off, err)
			tally.lost++
			off++
			continue
		}
		recs, err := records(data)
		if err != nil {
			r.t.Errorf("offset %d: %v", off, err)
			tally.lost++
			off++
			continue
		}
		for _, rec := range recs {
			if rec.Offset >= off && !bytes.Equal(rec.Value, value(rec.Offset)) {
				r.t.Errorf("offset %d: wrong bytes", rec.Offset)
				tally.lost++
			}
			off = rec.Offset + 1
		}
	}
	// Finished rows point at complete objects; nothing else is stored.
	live := map[string]bool{}
	for _, s := range resp.Segments {
		if s.State != "COPY_SEGMENT_FINISHED" {
			continue
		}
		live[s.SegmentId] = true
		_, bad := r.checkCopy(ctx, s)
		tally.corrupt += bad
	}
	tally.orphans += r.checkNoOrphans(ctx, live)
	// No local segment at or above the log start offset is gone without a
	// finished copy.
	for _, f := range r.rolled {
		end := r.endOf(f.BaseOffset)
		if end < lso {
			continue
		}
		if _, err := os.Stat(filepath.Join(r.root, "logs", r.topic+"-0", kafkalog.FileName(f.BaseOffset, ".log"))); err == nil {
			continue
		}
		covered := false
		for _, s := range resp.Segments {
			covered = covered || (s.State == "COPY_SEGMENT_FINISHED" && s.StartOffset <= f.BaseOffset && s.EndOffset >= end)
		}
		if !covered {
			r.t.Errorf("segment %d deleted locally without a finished copy", f.BaseOffset)
			tally.unsafe++
		}
	}
}

// checkCopy reads the manifest of the finished copy s of the rig's
// partition and verifies every object it lists (size and checksum). It
// returns the manifest (nil when it cannot be read) and how many of the
// copy's objects are missing or corrupt (the manifest counting as one),
// each also reported as a test error.
func (r *crashRig) checkCopy(ctx context.Context, s *tierdpb.SegmentMetadata) (*rsm.Manifest, int) {
	r.t.Helper()
	id, _ := remotelog.ParseSegmentID(s.SegmentId)
	meta := remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: r.topic}, ID: id, StartOffset: s.StartOffset}
	mf, err := r.mgr.ReadManifest(ctx, r.mgr.Key(meta, ".manifest.json"))
	if err != nil {
		r.t.Errorf("finished copy %d: %v", s.StartOffset, err)
		return nil, 1
	}
	bad := 0
	for _, o := range mf.Objects {
		if err := r.mgr.VerifyObject(ctx, o); err != nil {
			r.t.Errorf("finished copy %d: %v", s.StartOffset, err)
			bad++
		}
	}
	return mf, bad
}

// checkNoOrphans lists the whole bucket and reports (as test errors) every
// object that belongs to no live copy (live: segment ids, as
// SegmentMetadata.SegmentId spells them) and is not a partition's
// ownership lease, its leader-epoch fence or an instance heartbeat, and
// every incomplete
// multipart upload. It returns how many it found.
func (r *crashRig) checkNoOrphans(ctx context.Context, live map[string]bool) int {
	r.t.Helper()
	n := 0
	err := r.direct.Iter(ctx, "", func(k string) error {
		if _, id, _, ok := rsm.ParseKey(k); (!ok && path.Base(k) != rsm.OwnerObject && path.Base(k) != rsm.FenceObject && !rsm.IsHeartbeatKey(k)) || (ok && !live[id.String()]) {
			r.t.Errorf("orphan object %s", k)
			n++
		}
		return nil
	})
	if err != nil {
		r.t.Errorf("list the bucket: %v", err)
	}
	ups, err := r.direct.IncompleteUploads(ctx, "")
	if err != nil {
		r.t.Errorf("list incomplete uploads: %v", err)
	}
	if len(ups) > 0 {
		r.t.Errorf("stale multipart uploads %v", ups)
		n += len(ups)
	}
	return n
}

// checkGone verifies that every ordered deletion ran to its end: the
// journal says "deleted" for it (its objects not being left is the orphan
// check's part).
func (r *crashRig) checkGone() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	j, err := r.admin.Admin().Journal(ctx, &tierdpb.JournalRequest{})
	if err != nil {
		r.t.Fatal(err)
	}
	done := map[string]bool{}
	for _, e := range j.GetEntries() {
		if e.GetEvent() == remotelog.JournalDeleted {
			done[e.GetTopic()] = true
		}
	}
	for _, topic := range r.gone {
		if !done[topic] {
			r.t.Errorf("the deletion of %s did not finish: journal %v", topic, j.GetEntries())
		}
	}
}

// logStart asks the daemon for the rig's partition's log start offset
// now; -1 when it does not answer.
func (r *crashRig) logStart(ctx context.Context) int64 {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := r.client.API().ListSegments(ctx, &tierdpb.ListSegmentsRequest{Topic: r.topic, Partition: 0})
	if err != nil {
		return -1
	}
	return resp.LogStartOffset
}

// endOf is the last offset of the rolled segment at base; -1 when the
// rig rolled none there.
func (r *crashRig) endOf(base int64) int64 {
	for i, f := range r.rolled {
		if f.BaseOffset == base {
			if i+1 < len(r.rolled) {
				return r.rolled[i+1].BaseOffset - 1
			}
			segs := r.log.Segments()
			return segs[len(segs)-1].BaseOffset - 1
		}
	}
	return -1
}

// crashHits counts the kills at named steps, by step: [0] at its first
// hit, [1] at its second.
type crashHits map[string][2]int

// add counts a kill at point ("name:N", N 1 or 2).
func (h crashHits) add(point string) {
	name, nth, _ := strings.Cut(point, ":")
	c := h[name]
	if nth == "2" {
		c[1]++
	} else {
		c[0]++
	}
	h[name] = c
}

// unreached lists, in order, the points no kill was counted at.
func (h crashHits) unreached(points []string) []string {
	var out []string
	for _, p := range points {
		if c := h[p]; c[0]+c[1] == 0 {
			out = append(out, p)
		}
	}
	return out
}

// format lists the counts in the order of points, as "name first+second".
func (h crashHits) format(points []string) string {
	var b strings.Builder
	for i, p := range points {
		if i > 0 {
			b.WriteString(", ")
		}
		c := h[p]
		fmt.Fprintf(&b, "%s %d+%d", p, c[0], c[1])
	}
	return b.String()
}
