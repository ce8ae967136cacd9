package remotecompact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// world is a Store, a Bucket and a Deleter over rows held in memory, with
// the copier's other hooks; it records in calls, in order, each call that
// writes, deletes or asks for something.
type world struct {
	rows      []remotelog.SegmentMetadata
	calls     []string
	nowMs     int64
	finishAt  int64 // EventTimestampMs of a finished merged row; 0: nowMs
	uploadErr error
	missing   remotelog.SegmentID // DownloadCopy says rsm.ErrNotFound for it
	present   bool                // ProofPresent's answer
	own       bool                // Partition.Renew's answer
	fenced    error               // the FencedAfterManifest sentinel
}

var errUpload = errors.New("upload cut off")

func (w *world) Segments(remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	return append([]remotelog.SegmentMetadata(nil), w.rows...), nil
}

func (w *world) FinishedSegments(remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	var out []remotelog.SegmentMetadata
	for _, r := range w.rows {
		if r.State == remotelog.CopySegmentFinished {
			out = append(out, r)
		}
	}
	return out, nil
}

func (w *world) Offsets(remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error) {
	return remotelog.PartitionOffsets{}, true, nil
}

func (w *world) AddSegment(m remotelog.SegmentMetadata) error {
	w.rows = append(w.rows, m)
	w.calls = append(w.calls, fmt.Sprintf("add %d-%d %s", m.StartOffset, m.EndOffset, m.State))
	return nil
}

func (w *world) UpdateState(_ remotelog.TopicPartition, _ int64, id remotelog.SegmentID, to remotelog.SegmentState) (remotelog.SegmentMetadata, error) {
	for i, r := range w.rows {
		if r.ID == id {
			r.State, r.EventTimestampMs = to, w.nowMs
			if w.finishAt != 0 {
				r.EventTimestampMs = w.finishAt
			}
			w.rows[i] = r
			w.calls = append(w.calls, fmt.Sprintf("%s %d-%d", to, r.StartOffset, r.EndOffset))
			return r, nil
		}
	}
	return remotelog.SegmentMetadata{}, errors.New("no such row")
}

func (w *world) UpdateStates(tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata, to remotelog.SegmentState) ([]remotelog.SegmentMetadata, error) {
	var out []remotelog.SegmentMetadata
	for _, r := range rows {
		m, err := w.UpdateState(tp, r.StartOffset, r.ID, to)
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (w *world) DownloadCopy(_ context.Context, m remotelog.SegmentMetadata, dir string) (*rsm.DownloadedCopy, error) {
	if m.ID == w.missing {
		return nil, fmt.Errorf("object of copy %d: %w", m.StartOffset, rsm.ErrNotFound)
	}
	p := filepath.Join(dir, m.ID.String()+".log")
	return &rsm.DownloadedCopy{Log: p}, os.WriteFile(p, nil, 0o644) // a copy with no batch left
}

func (w *world) CheckFence(context.Context, remotelog.TopicPartition, string, int32) error {
	return nil
}

func (w *world) ProofPresent(_ context.Context, by remotelog.SegmentMetadata) (bool, error) {
	w.calls = append(w.calls, fmt.Sprintf("proof %d-%d", by.StartOffset, by.EndOffset))
	return w.present, nil
}

func (w *world) Delete(_ context.Context, r remotelog.SegmentMetadata) error {
	w.calls = append(w.calls, fmt.Sprintf("delete %d-%d", r.StartOffset, r.EndOffset))
	return nil
}

func (w *world) Discard(_ context.Context, r remotelog.SegmentMetadata) error {
	w.calls = append(w.calls, fmt.Sprintf("discard %d-%d", r.StartOffset, r.EndOffset))
	return nil
}

func (w *world) Abandon(r remotelog.SegmentMetadata, err error) error {
	w.calls = append(w.calls, fmt.Sprintf("abandon %d-%d", r.StartOffset, r.EndOffset))
	return err
}

func (w *world) AbortUploads(_ context.Context, _ remotelog.TopicPartition, ids map[remotelog.SegmentID]bool) error {
	w.calls = append(w.calls, fmt.Sprintf("abort %d", len(ids)))
	return nil
}

// row is a finished copy of [start, end], 100 bytes, finished at ms 1.
func row(start, end int64) remotelog.SegmentMetadata {
	return remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "t"}, ID: remotelog.NewSegmentID(), StartOffset: start,
		EndOffset: end, SizeInBytes: 100, EventTimestampMs: 1, State: remotelog.CopySegmentFinished, MaxTimestampMs: -1}
}

// compactOnce runs one Compact over w in a fresh compactor.
func compactOnce(t *testing.T, w *world, enabled bool) (*Compactor, error) {
	t.Helper()
	c := New(Deps{Store: w, Bucket: w, Deleter: w, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return time.UnixMilli(w.nowMs) },
		Upload: func(ctx context.Context, meta remotelog.SegmentMetadata, files rsm.SegmentFiles) (remotelog.SegmentMetadata, error) {
			w.calls = append(w.calls, "upload")
			return meta, w.uploadErr
		},
		FencedAfterManifest: w.fenced,
		Suspect: func(m remotelog.SegmentMetadata) {
			w.calls = append(w.calls, fmt.Sprintf("suspect %d-%d", m.StartOffset, m.EndOffset))
		},
		NeedSweep: func(remotelog.TopicPartition) { w.calls = append(w.calls, "sweep") }}, prometheus.NewRegistry())
	staging := filepath.Join(t.TempDir(), "staging")
	p := Partition{TP: remotelog.TopicPartition{Topic: "t"}, LeaderEpoch: -1, Staging: staging, LocalStart: math.MaxInt64,
		Renew: func(context.Context) (bool, error) { return w.own, nil }}
	err := c.Compact(context.Background(), p, Pass{Enabled: enabled, Settings: Settings{SegmentBytes: 1000, DirtyRatio: 0.5},
		CopyTimeout: time.Minute, IndexIntervalBytes: 4096})
	if _, serr := os.Stat(staging); !os.IsNotExist(serr) {
		t.Fatalf("staging folder left behind: %v", serr)
	}
	return c, err
}

// TestCompactorSteps: each outcome of one merge, in the calls it makes
// to the store, bucket, delete protocol and the copier's hooks, its
// error and its metrics.
func TestCompactorSteps(t *testing.T) {
	sentinel := errors.New("fenced after the manifest")
	cases := []struct {
		name     string
		setup    func(w *world)
		disabled bool
		calls    []string
		err      error // errors.Is the error; nil: no error
		merges   float64
		failures float64
	}{
		{name: "committed, then the merged copies deleted", calls: []string{"add 0-19 COPY_SEGMENT_STARTED", "upload",
			"COPY_SEGMENT_FINISHED 0-19", "proof 0-19", "delete 0-9", "delete 10-19", "abort 2"}, merges: 1},
		{name: "an upload that fails is discarded and swept", setup: func(w *world) { w.uploadErr = errUpload },
			calls: []string{"add 0-19 COPY_SEGMENT_STARTED", "upload", "sweep", "discard 0-19"}, err: errUpload, failures: 1},
		{name: "fenced after the manifest: the row is abandoned", setup: func(w *world) { w.uploadErr = fmt.Errorf("%w: epoch", sentinel) },
			calls: []string{"add 0-19 COPY_SEGMENT_STARTED", "upload", "abandon 0-19"}, err: sentinel, failures: 1},
		{name: "a copy missing in the bucket is suspected", setup: func(w *world) { w.missing = w.rows[1].ID },
			calls: []string{"suspect 10-19"}, err: rsm.ErrNotFound, failures: 1},
		{name: "not ours any more: nothing", setup: func(w *world) { w.own = false }},
		{name: "off: nothing", disabled: true},
		{name: "the merged copy missing: the old copies stay", setup: func(w *world) { w.present = false }, calls: []string{"add 0-19 COPY_SEGMENT_STARTED",
			"upload", "COPY_SEGMENT_FINISHED 0-19", "proof 0-19"}, err: ErrCompaction, merges: 1},
		{name: "the clock went back: the merged copy goes instead", setup: func(w *world) { w.finishAt = -5 }, calls: []string{"add 0-19 COPY_SEGMENT_STARTED",
			"upload", "COPY_SEGMENT_FINISHED 0-19", "delete 0-19", "abort 1"}, merges: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &world{rows: []remotelog.SegmentMetadata{row(0, 9), row(10, 19)}, nowMs: 100, present: true, own: true, fenced: sentinel}
			if tc.setup != nil {
				tc.setup(w)
			}
			c, err := compactOnce(t, w, !tc.disabled)
			if tc.err == nil && err != nil || tc.err != nil && (!errors.Is(err, tc.err) || !errors.Is(err, ErrCompaction)) {
				t.Fatalf("error %v, want one wrapping %v and ErrCompaction", err, tc.err)
			}
			if !reflect.DeepEqual(w.calls, tc.calls) && len(w.calls)+len(tc.calls) > 0 {
				t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(w.calls, "\n"), strings.Join(tc.calls, "\n"))
			}
			if got := testutil.ToFloat64(c.m.merges); got != tc.merges {
				t.Fatalf("merges_total %v, want %v", got, tc.merges)
			}
			if got := testutil.ToFloat64(c.m.failures); got != tc.failures {
				t.Fatalf("failures_total %v, want %v", got, tc.failures)
			}
			if tc.merges == 1 && testutil.ToFloat64(c.m.merged) != 2 || tc.merges == 0 && testutil.ToFloat64(c.m.merged) != 0 {
				t.Fatalf("copies_merged_total %v", testutil.ToFloat64(c.m.merged))
			}
		})
	}
}

// TestDropLostMerges: a damaged merged copy goes when every copy it
// merged is finished, undamaged and present, and only then.
func TestDropLostMerges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(olds []remotelog.SegmentMetadata, w *world)
		deleted bool
	}{
		{name: "its copies are whole", deleted: true},
		{name: "one of its copies is damaged", mutate: func(olds []remotelog.SegmentMetadata, _ *world) { olds[1].Damaged = ".log" }},
		{name: "one of its copies is gone", mutate: func(olds []remotelog.SegmentMetadata, _ *world) { olds[1].State = remotelog.DeleteSegmentFinished }},
		{name: "its copies are missing in the bucket", mutate: func(_ []remotelog.SegmentMetadata, w *world) { w.present = false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			olds := []remotelog.SegmentMetadata{row(0, 9), row(10, 19)}
			merged := row(0, 19)
			merged.EventTimestampMs, merged.Damaged, merged.CompactionOf = 2, ".log", []remotelog.SegmentID{olds[0].ID, olds[1].ID}
			w := &world{nowMs: 100, present: true, own: true}
			if tc.mutate != nil {
				tc.mutate(olds, w)
			}
			w.rows = append(olds, merged)
			if _, err := compactOnce(t, w, false); err != nil {
				t.Fatal(err)
			}
			deleted := false
			for _, c := range w.calls {
				if c == "delete 0-19" {
					deleted = true
				}
				if strings.HasPrefix(c, "delete ") && c != "delete 0-19" {
					t.Fatalf("deleted a merged copy's source: %s", c)
				}
			}
			if deleted != tc.deleted {
				t.Fatalf("merged copy deleted: %v, want %v (calls %v)", deleted, tc.deleted, w.calls)
			}
		})
	}
}
