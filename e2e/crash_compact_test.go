package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/checkpoint"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/seglog"
)

// compactCrashPoints are the steps of remote compaction where the daemon
// kills itself (copier/remotecompact.go), and the delete steps a merge
// and its clean-up go through.
var compactCrashPoints = []string{
	"compact.started", "compact.uploaded", "compact.finished", "compact.merged-deleted",
	"remote.delete-started", "remote.objects-deleted",
}

// compactTopic is the compacted topic of the remote compaction crash test.
const compactTopic = "ccrash"

// compactRig is one partition of a compacted topic written by this
// process with the embedded log, tiered and remotely compacted by a tierd
// subprocess that gets killed and restarted.
type compactRig struct {
	crashRig
	written map[int64][]byte // offset -> value written (nil: a tombstone)
	keys    map[int64]string // offset -> key
	model   map[string][]byte
}

// compactedValue is the value written at offset for key.
func compactedValue(key string, off int64) []byte {
	return []byte(fmt.Sprintf("%s written at offset %d|%s", key, off, strings.Repeat("v", int(off%97))))
}

type compactTally struct{ kills, lostKeys, badValues, orphans, corrupt, merged int }

// check reads the whole log through the embedded log and tierd's fetch
// API (remote tier below the local log start offset) and verifies the
// invariants after a round.
func (r *compactRig) check(resp *tierdpb.ListSegmentsResponse, tally *compactTally) {
	r.t.Helper()
	ctx := context.Background()
	got := map[string][]byte{}
	prevLast := int64(-1)
	hw := r.log.HighWatermark()
	for off := resp.LogStartOffset; off < hw; {
		data, err := r.log.ReadContext(ctx, off, 1<<20)
		if err != nil {
			r.t.Errorf("read at offset %d: %v", off, err)
			tally.lostKeys++
			return
		}
		if len(data) == 0 {
			break
		}
		for p := 0; p < len(data); {
			b, err := batch.ParseHeader(data[p:], int64(p))
			if err != nil {
				r.t.Errorf("offset %d: %v", off, err)
				return
			}
			if b.BaseOffset <= prevLast {
				r.t.Errorf("batch [%d, %d] after offset %d: offsets reordered", b.BaseOffset, b.LastOffset, prevLast)
			}
			prevLast = b.LastOffset
			recs, err := batch.Records(data[p:p+int(b.Size)], nil)
			if err != nil {
				r.t.Errorf("offset %d: %v", b.BaseOffset, err)
				return
			}
			for _, rec := range recs {
				want, ok := r.written[rec.Offset]
				if !ok || r.keys[rec.Offset] != string(rec.Key) || !bytes.Equal(rec.Value, want) {
					r.t.Errorf("offset %d: key %q value %.30q is not what was written there", rec.Offset, rec.Key, rec.Value)
					tally.badValues++
				}
				if rec.Value == nil {
					delete(got, string(rec.Key))
				} else {
					got[string(rec.Key)] = rec.Value
				}
			}
			p += int(b.Size)
			off = b.LastOffset + 1
		}
	}
	for k, v := range r.model {
		if !bytes.Equal(got[k], v) {
			r.t.Errorf("key %s reads %.30q, want its latest value %.30q", k, got[k], v)
			tally.lostKeys++
		}
	}
	for k := range got {
		if _, ok := r.model[k]; !ok {
			r.t.Errorf("key %s was deleted and reads again", k)
			tally.lostKeys++
		}
	}
	// Finished rows cover [log start, local log start) without a gap and
	// point at whole objects; nothing else is stored.
	live := map[string]bool{}
	next := resp.LogStartOffset
	fin := []*tierdpb.SegmentMetadata{}
	for _, s := range resp.Segments {
		if s.State == "COPY_SEGMENT_FINISHED" {
			fin = append(fin, s)
		}
	}
	sort.Slice(fin, func(i, j int) bool { return fin[i].StartOffset < fin[j].StartOffset })
	for _, s := range fin {
		live[s.SegmentId] = true
		if s.StartOffset > next {
			r.t.Errorf("offsets %d-%d have no finished copy", next, s.StartOffset-1)
			tally.lostKeys++
		}
		next = max(next, s.EndOffset+1)
		mf, bad := r.checkCopy(ctx, s)
		tally.corrupt += bad
		if mf != nil && len(mf.CompactionOf) > 0 {
			tally.merged++
		}
	}
	if next < resp.LocalLogStartOffset {
		r.t.Errorf("offsets %d-%d have no finished copy", next, resp.LocalLogStartOffset-1)
		tally.lostKeys++
	}
	tally.orphans += r.checkNoOrphans(ctx, live)
}

// TestCrashRemoteCompaction kills the daemon at every step of remote
// compaction (and at random moments), restarts it, and checks after each
// round, reading the whole log through the embedded log and tierd's fetch
// API, that every key reads back as its latest value (none lost, no
// tombstoned key back), that offsets never go back, that every record read
// is the one written at its offset, that finished copies cover the
// tiered range and match their manifests, and that no object is left
// without a live row. TIERD_COMPACT_CRASH_ROUNDS sets the number of kills
// (default 12).
func TestCrashRemoteCompaction(t *testing.T) {
	rounds := 12
	if v := os.Getenv("TIERD_COMPACT_CRASH_ROUNDS"); v != "" {
		rounds, _ = strconv.Atoi(v)
	}
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "ccrash")
	root := t.TempDir()
	r := &compactRig{crashRig: crashRig{t: t, root: root, topic: compactTopic, bin: buildTierd(t), addr: freePort(t)},
		written: map[int64][]byte{}, keys: map[int64]string{}, model: map[string][]byte{}}
	mcfg := minio.DefaultConfig()
	mcfg.Endpoint, mcfg.Bucket, mcfg.Insecure = srv.Endpoint, "ccrash", true
	var err error
	if r.direct, err = minio.New(mcfg, nil); err != nil {
		t.Fatal(err)
	}
	if r.mgr, err = rsm.NewManager(r.direct, rsm.Config{}); err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(root, "logs")
	r.cfg = filepath.Join(root, "tierd.yaml")
	os.WriteFile(r.cfg, []byte(fmt.Sprintf(`copier:
  log_dirs: [%s]
  broker_id: 1
  remote.log.manager.task.interval.ms: 20
  copy_timeout: 20s
  file.delete.delay.ms: 0
  log.local.retention.ms: 0
  log.retention.ms: -1
  initial_retention_delay: 0s
  topics:
    %s: {cleanup.policy: compact}
  remote_compaction: {min.cleanable.dirty.ratio: 0.3, delete.retention.ms: 300}
bucket:
  type: minio
  minio: {endpoint: http://%s, bucket: ccrash}
metadata: {dir: %s}
fetch: {listen: %s}
http: {listen: ""}
`, logDir, compactTopic, srv.Endpoint, filepath.Join(root, "meta"), r.addr)), 0o644)
	if r.client, err = grpcapi.Dial(r.addr); err != nil {
		t.Fatal(err)
	}
	defer r.client.Close()
	tp := remotelog.TopicPartition{Topic: compactTopic, Partition: 0}
	if r.log, err = seglog.Open(filepath.Join(logDir, tp.String()), seglog.DefaultConfig(), seglog.WithRemote(r.client.Partition(compactTopic, 0))); err != nil {
		t.Fatal(err)
	}
	defer r.log.Close()
	rng := rand.New(rand.NewPCG(13, uint64(rounds)))
	var tally compactTally
	hits := crashHits{}
	named := 0
	for round := 0; round < rounds; round++ {
		// New data: updates of 12 keys, about one in eight a tombstone,
		// in batches of 1 to 4 records, rolled into one segment.
		n := 15 + rng.IntN(25)
		for i := 0; i < n; {
			var recs []seglog.Record
			for j := 1 + rng.IntN(4); j > 0 && i < n; j, i = j-1, i+1 {
				off := r.log.HighWatermark() + int64(len(recs))
				key := fmt.Sprintf("key-%02d", rng.IntN(12))
				rec := seglog.Record{Key: []byte(key), Timestamp: time.Now().UnixMilli()}
				if rng.IntN(8) != 0 {
					rec.Value = compactedValue(key, off)
				}
				r.written[off], r.keys[off] = rec.Value, key
				if rec.Value == nil {
					delete(r.model, key)
				} else {
					r.model[key] = rec.Value
				}
				recs = append(recs, rec)
			}
			if _, err := r.log.Append(recs...); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.log.Roll(); err != nil {
			t.Fatal(err)
		}
		// The broker's cleaner passed every rolled segment (the copier
		// copies a compacted topic's segments only below this).
		if err := checkpoint.Update(filepath.Join(logDir, "cleaner-offset-checkpoint"), tp, r.log.HighWatermark()); err != nil {
			t.Fatal(err)
		}
		// Four kills in five at a named step, taking the steps in turn: the
		// first hit of a merge's steps (a start makes one merge), the
		// first or second of a delete's.
		point := ""
		if round > 0 && rng.IntN(5) != 0 {
			name, n := compactCrashPoints[named%len(compactCrashPoints)], 1
			if strings.HasPrefix(name, "remote.") {
				n += rng.IntN(2)
			}
			point = fmt.Sprintf("%s:%d", name, n)
			named++
		}
		r.start(point)
		if point == "" {
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
			r.kill()
		} else if r.exitedOrIdle(10*time.Second, nil) {
			hits.add(point)
		} else {
			r.kill() // the step did not come up this time
		}
		tally.kills++
		// Restart cleanly, let it sync and merge, check, stop.
		r.start("")
		resp, err := r.synced(time.Now().Add(60*time.Second), nil)
		if err != nil {
			r.failRound(round, point, err)
		}
		r.check(resp, &tally)
		r.stop(round)
		r.failedRound(round, point)
	}
	summary := fmt.Sprintf("remote compaction crash test: %d kills, %d lost keys, %d wrong values, %d orphan objects", tally.kills, tally.lostKeys, tally.badValues, tally.orphans)
	fmt.Println(summary)
	t.Logf("kills at named steps, at their first+second hit: %s (the rest at random moments); merged copies seen in checks: %d", hits.format(compactCrashPoints), tally.merged)
	if tally.merged == 0 {
		t.Error("no merged copy was ever made")
	}
	if tally.corrupt > 0 {
		t.Errorf("%d finished objects missing or corrupt", tally.corrupt)
	}
	if missed := hits.unreached(compactCrashPoints); rounds >= 30 && len(missed) > 0 {
		t.Errorf("%d of %d crash points were never reached: %s", len(missed), len(compactCrashPoints), strings.Join(missed, ", "))
	}
}
