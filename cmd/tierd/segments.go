package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rlmm"
)

// partitionRows is what "tierd segments" prints for one partition.
type partitionRows struct {
	offsets *tierdpb.ListSegmentsResponse // nil: nothing remote
	local   map[int64]int64               // base offset -> bytes
	dir     string
	status  *remotelog.PartitionStatus // nil: none reported
}

func runSegments(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := configCommand("segments", "tierd segments --config tierd.yaml", args, stderr, nil)
	if !ok {
		return code
	}
	if err := listSegments(ctx, cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "tierd segments: %v\n", err)
		return 1
	}
	return 0
}

// listSegments prints local and remote segments per partition. It asks a
// running tierd over gRPC; when none answers it opens the metadata store.
func listSegments(ctx context.Context, cfg config.Config, w io.Writer) error {
	parts := map[kafkalog.TopicPartition]*partitionRows{}
	for _, dir := range cfg.Copier.LogDirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			tp, ok := kafkalog.ParsePartitionDir(e.Name())
			if !ok || !e.IsDir() {
				continue
			}
			pr := &partitionRows{local: map[int64]int64{}, dir: filepath.Join(dir, e.Name())}
			if sd, err := kafkalog.ListSegmentDir(pr.dir); err == nil {
				for _, f := range sd.Segments {
					pr.local[f.BaseOffset] = f.Info.Size()
				}
			}
			parts[tp] = pr
		}
	}
	remote, source, closeFn, err := remoteLister(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeFn()
	remoteTPs, err := remote.partitions(ctx)
	if err != nil {
		return err
	}
	for _, tp := range remoteTPs { // remote-only partitions too
		if parts[tp] == nil {
			parts[tp] = &partitionRows{local: map[int64]int64{}}
		}
	}
	tps := make([]kafkalog.TopicPartition, 0, len(parts))
	for tp := range parts {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool { return tps[i].String() < tps[j].String() })
	st, err := remote.status(ctx)
	if err != nil {
		return fmt.Errorf("partition status: %w", err)
	}
	for i, p := range st.Partitions {
		if pr := parts[kafkalog.TopicPartition{Topic: p.Topic, Partition: p.Partition}]; pr != nil {
			pr.status = &st.Partitions[i]
		}
	}
	fmt.Fprintf(w, "remote metadata from %s\n", source)
	for _, tp := range tps {
		pr := parts[tp]
		resp, err := remote.list(ctx, tp)
		if status.Code(err) == codes.PermissionDenied { // the ACLs hide it from this caller
			fmt.Fprintf(w, "%s: not shown: %s\n", tp, status.Convert(err).Message())
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tp, err)
		}
		pr.offsets = resp
		printPartition(w, tp, pr)
	}
	ds, err := remote.deletions(ctx)
	if err != nil {
		return fmt.Errorf("scheduled deletions: %w", err)
	}
	if len(ds) > 0 {
		fmt.Fprintf(w, "\npending deletions of whole partitions' remote copies ('tierd partitions restore TOPIC-P' cancels one before it is due):\n")
		printDeletions(w, ds)
	}
	return listBrokerCopies(ctx, cfg, remote, w)
}

func printPartition(w io.Writer, tp kafkalog.TopicPartition, pr *partitionRows) {
	fmt.Fprintf(w, "\n%s", tp)
	if pr.offsets != nil {
		fmt.Fprintf(w, ": log start offset %d, local log start offset %d, highest tiered offset %d",
			pr.offsets.LogStartOffset, pr.offsets.LocalLogStartOffset, pr.offsets.HighestTieredOffset)
	}
	fmt.Fprintln(w)
	if pr.status != nil {
		fmt.Fprintln(w, statusLine(*pr.status))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "base offset\tlast offset\tbytes\tlocal\tremote state\tstored\tsegment id\t")
	shown := map[int64]bool{}
	var damaged, merged []string
	compacted := 0
	if pr.offsets != nil {
		for _, s := range pr.offsets.Segments {
			if s.State == remotelog.CopySegmentFinished.String() {
				if s.GetCompacted() {
					compacted++
				}
				if ids := s.GetCompactionOf(); len(ids) > 0 {
					merged = append(merged, fmt.Sprintf("  base offset %d segment %s: merges %s (%s)", s.StartOffset, s.SegmentId,
						plural(len(ids), "copy", "copies"), strings.Join(ids, ", ")))
				}
			}
			_, local := pr.local[s.StartOffset]
			state := s.State
			if s.GetDamaged() != "" {
				state += " (damaged)"
				damaged = append(damaged, fmt.Sprintf("  base offset %d segment %s: %s", s.StartOffset, s.SegmentId, s.GetDamaged()))
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", s.StartOffset, s.EndOffset, s.SizeInBytes, yesNo(local), state, formText(s), s.SegmentId)
			shown[s.StartOffset] = true
		}
	}
	bases := make([]int64, 0, len(pr.local))
	for b := range pr.local {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	for i, b := range bases {
		if !shown[b] {
			last := "-" // the active segment's end is still open
			if i+1 < len(bases) {
				last = fmt.Sprint(bases[i+1] - 1)
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\tyes\t-\t-\t-\t\n", b, last, pr.local[b])
		}
	}
	tw.Flush()
	if compacted > 0 {
		fmt.Fprintf(w, "%s of a compacted topic (cleaned records, copied below the cleaner checkpoint)\n", plural(compacted, "finished copy", "finished copies"))
	}
	if len(merged) > 0 {
		fmt.Fprintf(w, "made by remote compaction:\n%s\n", strings.Join(merged, "\n"))
	}
	if len(damaged) > 0 {
		fmt.Fprintf(w, "%s marked damaged (%s):\n%s\n", plural(len(damaged), "copy", "copies"), damagedHelp, strings.Join(damaged, "\n"))
	}
}

// formText is a copy's form in the "stored" column (storedText).
func formText(s *tierdpb.SegmentMetadata) string {
	return storedText(s.GetForm(), s.GetEncrypted(), s.GetStoredSizeInBytes(), s.GetSizeInBytes())
}

// storedText is "plain" (a copy stored as it came), or "chunked"
// ("chunked+enc" when encrypted) with its stored .log size, bytes, and
// that size over the original's, size ("chunked+enc 5242 B 0.4%":
// compressed to 0.4%).
func storedText(form string, encrypted bool, stored, size int64) string {
	switch {
	case form == "":
		return "plain"
	case encrypted:
		form += "+enc"
	}
	if stored > 0 {
		if size > 0 {
			return fmt.Sprintf("%s %d B %.1f%%", form, stored, 100*float64(stored)/float64(size))
		}
		return fmt.Sprintf("%s %d B", form, stored)
	}
	return form
}

// damagedHelp says what a damaged mark means and what clears it.
const damagedHelp = "they no longer let a local segment be deleted, their segments are copied again while on local disk; " +
	"a mark clears when a later check finds every object back with the size and checksum its manifest records " +
	"(tierd verify --topic T reports whether they are)"

// plural is "1 copy", "2 copies".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

type lister interface {
	list(ctx context.Context, tp kafkalog.TopicPartition) (*tierdpb.ListSegmentsResponse, error)
	deletions(ctx context.Context) ([]*tierdpb.PartitionDeletion, error)
	partitions(ctx context.Context) ([]kafkalog.TopicPartition, error)
	status(ctx context.Context) (remotelog.TieringStatus, error)
}

// status asks the running tierd; one that does not report it has none.
func (g grpcLister) status(ctx context.Context) (remotelog.TieringStatus, error) {
	resp, err := g.c.Admin().PartitionStatus(ctx, &tierdpb.PartitionStatusRequest{})
	if status.Code(err) == codes.Unimplemented {
		return remotelog.TieringStatus{}, nil
	}
	return grpcapi.StatusFromProto(resp), err
}

// status computes what a pass would start from (copier.Evaluate). What it
// could not read is left out of it: the segment listing reports that.
func (s *storeLister) status(context.Context) (remotelog.TieringStatus, error) {
	st, _ := copier.Evaluate(s.cfg, s.s, time.Now())
	return st, nil
}

func (g grpcLister) partitions(ctx context.Context) ([]kafkalog.TopicPartition, error) {
	resp, err := g.c.Admin().ListPartitions(ctx, &tierdpb.ListPartitionsRequest{})
	var out []kafkalog.TopicPartition
	for _, tp := range resp.GetPartitions() {
		out = append(out, kafkalog.TopicPartition{Topic: tp.GetTopic(), Partition: tp.GetPartition()})
	}
	return out, err
}

func (s *storeLister) partitions(context.Context) ([]kafkalog.TopicPartition, error) {
	return s.s.Partitions()
}

func (g grpcLister) deletions(ctx context.Context) ([]*tierdpb.PartitionDeletion, error) {
	resp, err := g.c.Admin().ListDeletions(ctx, &tierdpb.ListDeletionsRequest{})
	return resp.GetDeletions(), err
}

func (s *storeLister) deletions(context.Context) ([]*tierdpb.PartitionDeletion, error) {
	ds, err := s.s.Deletions(nil)
	var out []*tierdpb.PartitionDeletion
	for _, d := range ds {
		out = append(out, grpcapi.DeletionToProto(d))
	}
	return out, err
}

type grpcLister struct{ c *grpcapi.Client }

func (g grpcLister) list(ctx context.Context, tp kafkalog.TopicPartition) (*tierdpb.ListSegmentsResponse, error) {
	resp, err := g.c.API().ListSegments(ctx, &tierdpb.ListSegmentsRequest{Topic: tp.Topic, Partition: tp.Partition})
	if fetchNotFound(err) {
		return nil, nil
	}
	return resp, err
}

type storeLister struct {
	s   *rlmm.Store
	cfg copier.Config
}

func (s *storeLister) list(_ context.Context, tp kafkalog.TopicPartition) (*tierdpb.ListSegmentsResponse, error) {
	offs, ok, err := s.s.Offsets(tp)
	if err != nil || !ok {
		return nil, err
	}
	rows, err := s.s.Segments(tp)
	if err != nil {
		return nil, err
	}
	resp := &tierdpb.ListSegmentsResponse{LogStartOffset: offs.LogStartOffset, HighestTieredOffset: offs.HighestTieredOffset, LocalLogStartOffset: offs.LocalLogStartOffset}
	for _, r := range rows {
		resp.Segments = append(resp.Segments, grpcapi.SegmentToProto(r))
	}
	return resp, nil
}

// remoteLister asks the running tierd at cfg.Fetch.Listen, or opens the
// metadata store of a stopped one.
func remoteLister(ctx context.Context, cfg config.Config) (lister, string, func(), error) {
	c, where, err := dialRunning(ctx, cfg)
	if err != nil {
		return nil, "", nil, err
	}
	if c != nil {
		return grpcLister{c}, where, func() { c.Close() }, nil
	}
	if err := metadataPresent(cfg); err != nil {
		return nil, "", nil, err
	}
	s, err := daemon.OpenStore(ctx, cfg)
	if err != nil {
		return nil, "", nil, fmt.Errorf("no tierd answers at %s, and the metadata store cannot be opened: %w", cfg.Fetch.Listen, err)
	}
	return &storeLister{s, cfg.Copier}, cfg.Metadata.Dir + " (tierd not running)", func() { s.Close() }, nil
}

func fetchNotFound(err error) bool { return status.Code(err) == codes.NotFound }
