package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/daemon/statuspage"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/instance"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	cfg, code, ok := configCommand("status", "tierd status --config tierd.yaml [--json]", args, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print the status as one JSON object (the shape of remotelog.TieringStatus)")
	})
	if !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	s, source, err := tieringStatus(ctx, cfg)
	if source == "" { // nothing to show
		fmt.Fprintf(stderr, "tierd status: %v\n", err)
		return 1
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(s); jerr != nil {
			fmt.Fprintf(stderr, "tierd status: %v\n", jerr)
			return 1
		}
	} else {
		printStatus(stdout, s, source, time.Now())
		var check func(string) error
		if s.Running {
			check = lockFilePresent
		}
		printLogDirs(stdout, cfg.Copier.ProbeLogDirs(check), s.Running)
		if cfg.RSM.Enabled {
			showRSMStatus(ctx, cfg, stdout)
		}
		if s.Running {
			showGroups(ctx, cfg, stdout)
		}
	}
	if err != nil { // part of the status could not be read
		fmt.Fprintf(stderr, "tierd status: %v\n", err)
		return 1
	}
	return 0
}

// tieringStatus asks the tierd running at cfg.Fetch.Listen for its status
// or, when none answers, computes one over the stopped tierd's log dirs and
// metadata store (copier.Evaluate). source says which; it is "" when there
// is no status at all (err says why). With a source, err reports what
// could not be read.
func tieringStatus(ctx context.Context, cfg config.Config) (s remotelog.TieringStatus, source string, err error) {
	c, where, err := dialRunning(ctx, cfg)
	if err != nil {
		return s, "", err
	}
	if c != nil {
		defer c.Close()
		resp, err := c.Admin().PartitionStatus(ctx, &tierdpb.PartitionStatusRequest{})
		if status.Code(err) == codes.Unimplemented {
			return s, "", fmt.Errorf("the tierd at %s (fetch.listen) does not report partition status: it is older than this tool", cfg.Fetch.Listen)
		}
		if err != nil {
			return s, "", err
		}
		return grpcapi.StatusFromProto(resp), where, nil
	}
	if err := metadataPresent(cfg); err != nil {
		return s, "", err
	}
	store, err := daemon.OpenStore(ctx, cfg)
	if err != nil {
		return s, "", fmt.Errorf("no tierd answers at %s, and the metadata store cannot be opened: %w", cfg.Fetch.Listen, err)
	}
	defer store.Close()
	s, err = copier.Evaluate(cfg.Copier, store, time.Now())
	return s, cfg.Metadata.Dir + " and the log dirs (tierd not running)", err
}

// printStatus prints one line per partition, then the counts by state.
func printStatus(w io.Writer, s remotelog.TieringStatus, source string, now time.Time) {
	fmt.Fprintf(w, "status from %s", source)
	if s.Running {
		fmt.Fprintf(w, ": %s, the last ended %s, the last successful %s", plural(int(s.Passes), "pass", "passes"), ago(s.LastPassMs, now), ago(s.LastSuccessMs, now))
	}
	fmt.Fprintln(w)
	if s.Running && s.Passes == 0 && len(s.Partitions) == 0 {
		fmt.Fprintln(w, "no pass has ended yet")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "partition\tstate\tpending\tlocal\thigh watermark\tremote\tlast copy\twhy")
	for _, p := range s.Partitions {
		fmt.Fprintf(tw, "%s-%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, p.State, pendingText(p), localText(p), hwText(p.HighWatermark),
			remoteText(p), ago(p.LastCopyMs, now), whyText(p))
	}
	tw.Flush()
	var damaged []string
	total := 0
	for _, p := range s.Partitions {
		if p.DamagedCopies > 0 {
			total += p.DamagedCopies
			damaged = append(damaged, fmt.Sprintf("  %s-%d: %s, first at %s", p.Topic, p.Partition, plural(p.DamagedCopies, "copy", "copies"), p.Damaged))
		}
	}
	if total > 0 {
		fmt.Fprintf(w, "%s marked damaged (%s; tierd segments lists them):\n%s\n", plural(total, "copy", "copies"), damagedHelp, strings.Join(damaged, "\n"))
	}
	if len(s.SkippedTopics) > 0 {
		fmt.Fprintf(w, "Kafka internal topics, never tiered: %s\n", strings.Join(s.SkippedTopics, ", "))
	}
	states, reasons := s.Counts()
	var parts []string
	for _, st := range remotelog.TierStates {
		part := fmt.Sprintf("%d %s", states[st], st)
		if st == remotelog.TierWaiting && states[st] > 0 {
			var rs []string
			for _, r := range remotelog.WaitReasons {
				if reasons[r] > 0 {
					rs = append(rs, fmt.Sprintf("%s %d", r, reasons[r]))
				}
			}
			part += " (" + strings.Join(rs, ", ") + ")"
		}
		parts = append(parts, part)
	}
	fmt.Fprintf(w, "%s: %s\n", plural(len(s.Partitions), "partition", "partitions"), strings.Join(parts, ", "))
}

// lockFilePresent is the tools' stand-in for the running tierd's check
// of a log dir (instance.Lock.Check): the lock file it holds there is
// present, else the directory at that path is not the one it locked (a
// disk unmounted under its mount point).
func lockFilePresent(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, instance.LockFile)); err != nil {
		return fmt.Errorf("%w: the running tierd locks this file in each log dir: the log dir is not the one it started on (unmounted, renamed or replaced?)", err)
	}
	return nil
}

// printLogDirs prints, for each log dir, whether it is there and whether
// tierd may delete local files in it, as this tool finds it now (the
// running tierd checks the same at every pass); running says a tierd
// runs, which is then not ready.
func printLogDirs(w io.Writer, dirs []copier.LogDirState, running bool) {
	if len(dirs) == 0 {
		fmt.Fprintln(w, "log dirs: none (copier.log_dirs is empty: tierd's own copier tiers nothing; the broker's copies are below)")
		return
	}
	fmt.Fprintln(w, "log dirs:")
	var bad []string
	for _, st := range dirs {
		switch {
		case !st.Available:
			bad = append(bad, st.Dir)
			fmt.Fprintf(w, "  %s: UNAVAILABLE (%s): tierd is not ready; it deletes nothing, locally or remotely, of the partitions it may hold, "+
				"and refuses 'tierd topics delete', until it is back\n", st.Dir, st.Err)
		case st.BrokerOwned:
			fmt.Fprintf(w, "  %s: broker-owned: %s\n", st.Dir, st.Why)
		default:
			fmt.Fprintf(w, "  %s: local retention by tierd: %s\n", st.Dir, st.Why)
		}
	}
	if len(bad) > 0 && running {
		fmt.Fprintf(w, "not ready: %s unavailable\n", plural(len(bad), "log dir", "log dirs")+" ("+strings.Join(bad, ", ")+")")
	}
}

// statusLine is "tierd segments"' line for one partition.
func statusLine(p remotelog.PartitionStatus) string {
	return fmt.Sprintf("status: %s, %s pending: %s", p.State, pendingText(p), whyText(p))
}

func whyText(p remotelog.PartitionStatus) string {
	why := p.Detail
	if p.Reason != "" {
		why = string(p.Reason) + ": " + why
	}
	if p.Error != "" && !strings.Contains(why, p.Error) {
		why += " (last error: " + p.Error + ")"
	}
	return why
}

func pendingText(p remotelog.PartitionStatus) string {
	if p.PendingSegments == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", p.PendingSegments, statuspage.SizeText(p.PendingBytes))
}

func localText(p remotelog.PartitionStatus) string {
	if p.LocalSegments == 0 {
		return "-"
	}
	return fmt.Sprintf("%d.. (active %s)", p.LocalLogStartOffset, offsetText(p.ActiveBaseOffset))
}

func remoteText(p remotelog.PartitionStatus) string {
	if p.HighestTieredOffset < 0 {
		return "-"
	}
	if p.RemoteSegments == 0 {
		return "none" // every copy deleted: the offsets bound nothing
	}
	return fmt.Sprintf("%d-%d (%s%s)", p.LogStartOffset, p.HighestTieredOffset, statuspage.SizeText(p.RemoteBytes), statuspage.StoredText(p))
}

// hwText is the high watermark, or why there is none.
func hwText(o int64) string {
	if o < 0 {
		return "- (no checkpoint entry)"
	}
	return fmt.Sprint(o)
}

func offsetText(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}

// ago prints a time in ms since the epoch as how long before now, "-" for
// none.
func ago(ms int64, now time.Time) string {
	if ms < 0 {
		return "-"
	}
	d := now.Sub(time.UnixMilli(ms)).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}
