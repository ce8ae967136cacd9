package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/seglog"
)

// The reference compaction scenario: 8 keys updated 4
// times, 2 of them then tombstoned, in a topic with these settings; 250
// filler records with keys of their own roll the segment, twice.
const (
	compactTopic       = "demo-compact"
	compactKeys        = 8
	compactUpdates     = 4
	compactTombstones  = 2 // the last two keys
	compactFillers     = 250
	compactValueBytes  = 5000
	compactSegmentMs   = 3600000
	compactDirtyRatio  = 0.01
	compactDeleteRetMs = 100
	compactMinLagMs    = 0
	compactMaxLagMs    = 8000
)

// compactValue is a value of the scenario: its label padded to 5000 bytes.
func compactValue(label string) []byte {
	v := bytes.Repeat([]byte{'.'}, compactValueBytes)
	copy(v, label)
	return v
}

// compactLogConfig is the reference compacted topic: cleanup.policy=compact with
// their settings, and Kafka's smallest segment.bytes, which the 5000-byte
// values fill within the 250 fillers.
func compactLogConfig() seglog.Config {
	c := seglog.DefaultConfig()
	c.SegmentBytes = seglog.MinSegmentBytes
	c.SegmentMs = compactSegmentMs
	c.CleanupPolicy = "compact"
	c.MinCleanableDirtyRatio = compactDirtyRatio
	c.DeleteRetentionMs = compactDeleteRetMs
	c.MinCompactionLagMs = compactMinLagMs
	c.MaxCompactionLagMs = compactMaxLagMs
	return c
}

// compactExpect is what a scan must find: records in total, the offsets
// that must hold tombstones, and the key -> latest value map.
type compactExpect struct {
	records    int
	tombstones []int64
	latest     map[string][]byte
}

// demoCompact runs the reference compaction scenario on the embedded log,
// reading the partition with a scan consumer (franz-go, through tierd's
// Kafka listener) before and after each cleaner pass, then lets tierd tier
// the cleaned segments and scans once more across both tiers. Every scan
// is checked: record count, tombstone offsets, and the key -> latest value
// map, which compaction must never change.
func demoCompact(ctx context.Context, o demoOptions, stdout, stderr io.Writer) (err error) {
	policy := "compact"
	e, err := openDemo(ctx, o, stdout, stderr, func(c *config.Config) {
		if c.Copier.Topics == nil {
			c.Copier.Topics = map[string]topics.TopicConfig{}
		}
		tc := c.Copier.Topics[compactTopic]
		tc.CleanupPolicy = &policy
		c.Copier.Topics[compactTopic] = tc
	})
	if err != nil {
		return err
	}
	defer e.close(&err, stdout)
	tp := remotelog.TopicPartition{Topic: compactTopic, Partition: 0}
	partDir := filepath.Join(e.cfg.Copier.LogDirs[0], compactTopic+"-0")
	w, err := seglog.Open(partDir, compactLogConfig())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, w.Close()) }()

	grpcAddr, kafkaAddr := "127.0.0.1:0", "127.0.0.1:0"
	if o.serve {
		grpcAddr, kafkaAddr = o.grpc, o.kafka
	}
	glis, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		return fmt.Errorf("gRPC API: %w", err)
	}
	klis, err := net.Listen("tcp", kafkaAddr)
	if err != nil {
		glis.Close()
		return fmt.Errorf("kafka listener: %w", err)
	}
	kl, err := e.d.KafkaListener(e.cfg, e.log, klis.Addr().String())
	if err != nil {
		glis.Close()
		klis.Close()
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	served, kserved := make(chan error, 1), make(chan error, 1)
	go func() { served <- e.d.API.Serve(sctx, glis) }()
	go func() { kserved <- kl.Serve(sctx, klis) }()
	defer func() {
		stop()
		err = errors.Join(err, <-served, <-kserved)
	}()
	addr := klis.Addr().String()
	fmt.Fprintf(stdout, "topic %s: cleanup.policy=compact segment.bytes=%d segment.ms=%d min.cleanable.dirty.ratio=%v delete.retention.ms=%d min.compaction.lag.ms=%d max.compaction.lag.ms=%d\n",
		compactTopic, seglog.MinSegmentBytes, compactSegmentMs, compactDirtyRatio, compactDeleteRetMs, compactMinLagMs, compactMaxLagMs)
	fmt.Fprintf(stdout, "each scan: a franz-go consumer through tierd's Kafka listener %s, from the start to the high watermark, building key -> latest value\n\n", addr)

	// 1. 8 keys x 4 updates, then tombstones for the last two keys: 34
	// records, all in the active segment, which the cleaner never touches.
	latest := map[string][]byte{}
	put := func(key string, value []byte) error {
		if _, err := w.Append(seglog.Record{Key: []byte(key), Value: value}); err != nil {
			return err
		}
		if value == nil {
			delete(latest, key)
		} else {
			latest[key] = value
		}
		return nil
	}
	for u := 1; u <= compactUpdates; u++ {
		for k := 1; k <= compactKeys; k++ {
			key := fmt.Sprintf("key-%d", k)
			if err := put(key, compactValue(fmt.Sprintf("%s update %d", key, u))); err != nil {
				return err
			}
		}
	}
	var tombs []int64
	for k := compactKeys - compactTombstones + 1; k <= compactKeys; k++ {
		tombs = append(tombs, int64(len(tombs)+compactKeys*compactUpdates))
		if err := put(fmt.Sprintf("key-%d", k), nil); err != nil {
			return err
		}
	}
	n := compactKeys*compactUpdates + compactTombstones
	if err := compactStep(ctx, stdout, w, nil, addr, fmt.Sprintf("%d keys x %d updates + %d tombstones", compactKeys, compactUpdates, compactTombstones),
		compactExpect{records: n, tombstones: tombs, latest: latest}); err != nil {
		return err
	}

	// 2. 250 fillers roll the segment; the first pass keeps each key's
	// latest record, tombstones included (their delete horizon starts).
	fillers := func(from int) error {
		for i := from; i < from+compactFillers; i++ {
			key := fmt.Sprintf("filler-%d", i)
			if err := put(key, compactValue(key)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := fillers(0); err != nil {
		return err
	}
	n += compactFillers
	if err := compactStep(ctx, stdout, w, nil, addr, fmt.Sprintf("%d filler records (keys filler-0..%d)", compactFillers, compactFillers-1),
		compactExpect{records: n, tombstones: tombs, latest: latest}); err != nil {
		return err
	}
	firstPass := time.Now()
	n = compactFillers + compactKeys
	if err := compactStep(ctx, stdout, w, w.Clean, addr, "first cleaner pass",
		compactExpect{records: n, tombstones: tombs, latest: latest}); err != nil {
		return err
	}

	// 3. delete.retention.ms later, 250 more fillers and a second pass:
	// the tombstones and the keys they deleted are gone.
	if wait := compactDeleteRetMs*time.Millisecond - time.Since(firstPass); wait > 0 {
		time.Sleep(wait + 10*time.Millisecond)
	}
	if err := fillers(compactFillers); err != nil {
		return err
	}
	n += compactFillers
	if err := compactStep(ctx, stdout, w, nil, addr, fmt.Sprintf("%d more filler records (keys filler-%d..%d)", compactFillers, compactFillers, 2*compactFillers-1),
		compactExpect{records: n, tombstones: tombs, latest: latest}); err != nil {
		return err
	}
	n = 2*compactFillers + compactKeys - compactTombstones
	if err := compactStep(ctx, stdout, w, w.Clean, addr, fmt.Sprintf("second cleaner pass, after delete.retention.ms=%d", compactDeleteRetMs),
		compactExpect{records: n, latest: latest}); err != nil {
		return err
	}

	// 4. Tier: tierd copies the cleaned segments (those below the cleaner
	// checkpoint), local.retention.ms removes their local files, and
	// remote compaction merges the adjacent copies into one re-compacted
	// copy; the scan then reads the cleaned log from both tiers.
	segs := w.Segments()
	active := segs[len(segs)-1].BaseOffset
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := e.d.Copier.Sync(ctx); err != nil {
			return err
		}
		offs, _, err := e.d.Store.Offsets(tp)
		if err != nil {
			return err
		}
		merged, err := mergedCopy(e.d, tp, active)
		if err != nil {
			return err
		}
		if offs.LocalLogStartOffset == active && merged {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tiering and remote compaction did not finish in 60s: %+v, merged copy %v", offs, merged)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(stdout, "tierd copied the cleaned segments (below the cleaner checkpoint), local.retention.ms=%d removed their local copies, and remote compaction merged the copies:\n", demoLocalRetMs)
	if err := printCompactTiers(stdout, e.d, w, tp); err != nil {
		return err
	}
	if err := compactStep(ctx, stdout, w, nil, addr, "scan across the remote and local tiers",
		compactExpect{records: n, latest: latest}); err != nil {
		return err
	}
	if o.serve {
		fmt.Fprintf(stdout, "\nserving the compacted log until interrupted (Ctrl-C):\n  Kafka listener %s: kcat -C -b %s -t %s -p 0 -o beginning -e -f '%%o %%k %%S\\n'\n  gRPC API %s\n", addr, addr, compactTopic, glis.Addr())
		<-ctx.Done()
	}
	e.printKept(stdout)
	return nil
}

// compactStep runs clean (when not nil), scans the partition and checks
// the scan against want, printing one line.
func compactStep(ctx context.Context, stdout io.Writer, w *seglog.Log, clean func() (seglog.CleanStats, error), addr, what string, want compactExpect) error {
	detail := ""
	if clean != nil {
		st, err := clean()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if !st.Cleaned {
			return fmt.Errorf("%s: the cleaner did not run: %s", what, st.Reason)
		}
		detail = fmt.Sprintf("\n    cleaned offsets %d-%d: %d of %d records kept; cleaner-offset-checkpoint %d",
			w.LogStartOffset(), st.FirstUncleanableOffset-1, st.RecordsKept, st.RecordsRead, st.FirstUncleanableOffset)
	}
	got, err := scanPartition(ctx, addr, compactTopic)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var tombs []int64
	for _, r := range got.Records {
		if r.Value == nil {
			tombs = append(tombs, r.Offset)
		}
	}
	fmt.Fprintf(stdout, "%-52s %4d records, %3d keys, tombstones at %v%s\n", what+":", len(got.Records), len(got.Latest), tombs, detail)
	switch {
	case len(got.Records) != want.records:
		return fmt.Errorf("%s: %d records, want %d", what, len(got.Records), want.records)
	case !slices.Equal(tombs, want.tombstones):
		return fmt.Errorf("%s: tombstones at %v, want %v", what, tombs, want.tombstones)
	case !maps.EqualFunc(got.Latest, want.latest, bytes.Equal):
		return fmt.Errorf("%s: the key -> latest value map differs from what was written (%d keys, want %d)", what, len(got.Latest), len(want.latest))
	}
	seen := map[string]bool{}
	for _, r := range got.Records {
		if seen[r.Key] && clean != nil {
			return fmt.Errorf("%s: key %s read twice after a cleaning", what, r.Key)
		}
		seen[r.Key] = true
	}
	return nil
}

// mergedCopy reports whether a finished copy that a remote compaction
// wrote covers every offset below end.
func mergedCopy(d *daemon.Parts, tp remotelog.TopicPartition, end int64) (bool, error) {
	rows, err := d.Store.Segments(tp)
	if err != nil {
		return false, err
	}
	for _, r := range rows {
		if r.State == remotelog.CopySegmentFinished && len(r.CompactionOf) > 0 && r.StartOffset == 0 && r.EndOffset == end-1 {
			return true, nil
		}
	}
	return false, nil
}

// printCompactTiers prints the partition's remote copies (every row,
// those a remote compaction replaced included) and local segments.
func printCompactTiers(stdout io.Writer, d *daemon.Parts, w *seglog.Log, tp remotelog.TopicPartition) error {
	rows, err := d.Store.Segments(tp)
	if err != nil {
		return err
	}
	slices.SortStableFunc(rows, func(a, b remotelog.SegmentMetadata) int { // live copies first, then by offset
		if fa, fb := a.State == remotelog.CopySegmentFinished, b.State == remotelog.CopySegmentFinished; fa != fb {
			if fa {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.StartOffset, b.StartOffset)
	})
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tier\tbase offset\tlast offset\tbytes\tstate\tcompacted\tmerged from\t")
	for _, r := range rows {
		from := "-"
		if n := len(r.CompactionOf); n > 0 {
			from = fmt.Sprintf("%d copies", n)
		}
		fmt.Fprintf(tw, "remote\t%d\t%d\t%d\t%s\t%s\t%s\t\n", r.StartOffset, r.EndOffset, r.SizeInBytes, r.State, yesNo(r.Compacted), from)
	}
	w.Refresh() // tierd's local retention removed files under it
	for _, s := range w.Segments() {
		last := "-"
		if s.NextOffset > s.BaseOffset {
			last = fmt.Sprint(s.NextOffset - 1)
		}
		state := "rolled"
		if s.Active {
			state = "active"
		}
		fmt.Fprintf(tw, "local\t%d\t%s\t%d\t%s\t-\t-\t\n", s.BaseOffset, last, s.Size, state)
	}
	return tw.Flush()
}
