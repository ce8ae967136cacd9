package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
)

// adminTimeout bounds an operator command: a running tierd answers between
// two passes, so one long copy can make it wait.
const adminTimeout = 10 * time.Minute

// dialAt connects to the tierd running at cfg.Fetch.Listen, and returns
// nil when none answers. It refuses a tierd whose metadata dir is not
// cfg's: the address would belong to another tierd.
func dialAt(ctx context.Context, cfg config.Config) (*grpcapi.Client, error) {
	c, err := dialTierd(cfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	up := c.WaitReady(pctx)
	cancel()
	if !up {
		c.Close()
		if err := plainToTLS(cfg.TLS.GRPC, cfg.Fetch.Listen); err != nil {
			return nil, err
		}
		return nil, tlsRefusal(cfg) // nil: nothing answers
	}
	if err := checkIdentity(ctx, c, cfg, cfg.Fetch.Listen+" (fetch.listen)"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// checkIdentity refuses the tierd c reaches at where when its metadata
// dir is not cfg's, or when it does not say which tierd it is.
func checkIdentity(ctx context.Context, c *grpcapi.Client, cfg config.Config, where string) error {
	id, err := c.Admin().Identity(ctx, &tierdpb.IdentityRequest{})
	switch status.Code(err) {
	case codes.OK:
	case codes.Unauthenticated:
		if cfg.Fetch.Auth.ClientTokenFile != "" || cfg.TLS.ClientCertFile != "" {
			return fmt.Errorf("the tierd at %s refused this tool's credentials (the token of fetch.client.token_file, or the certificate of tls.client_cert_file): %w",
				where, err)
		}
		fallthrough
	case codes.Unimplemented:
		return fmt.Errorf("a tierd answers at %s but serves its Admin service there only to authenticated callers: run the tool on its host as its user (the admin socket %s), or give it a token (fetch.client.token_file) or a client certificate (tls.grpc: mtls): %w",
			where, daemon.AdminSocket(cfg), err)
	default:
		return fmt.Errorf("the server at %s does not say which tierd it is: %w", where, err)
	}
	want := daemon.Identity(cfg, "").MetadataDir
	if id.GetMetadataDir() != want {
		return fmt.Errorf("the tierd at %s uses metadata dir %s (instance %s), not %s from this config: another tierd answers there; refusing",
			where, id.GetMetadataDir(), id.GetInstanceId(), want)
	}
	return nil
}

// adminClient reaches the Admin service of the running tierd at
// cfg.Fetch.Listen or, when none answers, runs it in this process over
// the stopped tierd's metadata, bucket and cluster.
func adminClient(ctx context.Context, cfg config.Config) (tierdpb.AdminClient, string, func(), error) {
	c, where, err := dialRunning(ctx, cfg)
	if err != nil {
		return nil, "", nil, err
	}
	if c != nil {
		return c.Admin(), where, func() { c.Close() }, nil
	}
	if err := metadataPresent(cfg); err != nil {
		return nil, "", nil, err
	}
	d, err := daemon.OpenParts(ctx, cfg, daemon.PartsOptions{}, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		return nil, "", nil, fmt.Errorf("no tierd answers at %s, and its metadata cannot be opened: %w", cfg.Fetch.Listen, err)
	}
	return localAdmin{grpcapi.NewAdmin(d.Copier, d.Store, daemon.Identity(cfg, d.InstanceID))}, cfg.Metadata.Dir + " (tierd not running)",
		func() { d.API.Close(); d.Close() }, nil
}

// localAdmin calls an in-process Admin service through the client
// interface.
type localAdmin struct{ s tierdpb.AdminServer }

func (l localAdmin) DeleteTopic(ctx context.Context, r *tierdpb.DeleteTopicRequest, _ ...grpc.CallOption) (*tierdpb.DeletionsResponse, error) {
	return l.s.DeleteTopic(ctx, r)
}

func (l localAdmin) RestorePartition(ctx context.Context, r *tierdpb.RestorePartitionRequest, _ ...grpc.CallOption) (*tierdpb.DeletionsResponse, error) {
	return l.s.RestorePartition(ctx, r)
}

func (l localAdmin) ListDeletions(ctx context.Context, r *tierdpb.ListDeletionsRequest, _ ...grpc.CallOption) (*tierdpb.DeletionsResponse, error) {
	return l.s.ListDeletions(ctx, r)
}

func (l localAdmin) Identity(ctx context.Context, r *tierdpb.IdentityRequest, _ ...grpc.CallOption) (*tierdpb.IdentityResponse, error) {
	return l.s.Identity(ctx, r)
}

func (l localAdmin) ListPartitions(ctx context.Context, r *tierdpb.ListPartitionsRequest, _ ...grpc.CallOption) (*tierdpb.ListPartitionsResponse, error) {
	return l.s.ListPartitions(ctx, r)
}

func (l localAdmin) PartitionStatus(ctx context.Context, r *tierdpb.PartitionStatusRequest, _ ...grpc.CallOption) (*tierdpb.PartitionStatusResponse, error) {
	return l.s.PartitionStatus(ctx, r)
}

func (l localAdmin) ConsumerGroups(ctx context.Context, r *tierdpb.ConsumerGroupsRequest, _ ...grpc.CallOption) (*tierdpb.ConsumerGroupsResponse, error) {
	return l.s.ConsumerGroups(ctx, r)
}

func (l localAdmin) Journal(ctx context.Context, r *tierdpb.JournalRequest, _ ...grpc.CallOption) (*tierdpb.JournalResponse, error) {
	return l.s.Journal(ctx, r)
}

// adminCommand parses a subcommand's flags, loads the config, connects
// and runs fn; errors are printed as "tierd NAME: message" (exit 1).
func adminCommand(ctx context.Context, name, usage string, args []string, stderr io.Writer, nargs int,
	setup func(*flag.FlagSet), fn func(ctx context.Context, a tierdpb.AdminClient, source string, args []string) error) int {
	var rest []string
	cfg, code, ok := configCommandArgs(name, usage, args, stderr, setup, &rest)
	if !ok {
		return code
	}
	if len(rest) != nargs {
		fmt.Fprintln(stderr, "usage: "+usage)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	a, source, closeFn, err := adminClient(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "tierd %s: %v\n", name, err)
		return 1
	}
	defer closeFn()
	if err := fn(ctx, a, source, rest); err != nil {
		if st, ok := status.FromError(err); ok {
			err = fmt.Errorf("%s (%s)", st.Message(), st.Code())
		}
		fmt.Fprintf(stderr, "tierd %s: %v\n", name, err)
		return 1
	}
	return 0
}

func runJournal(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var after, limit int64
	return adminCommand(ctx, "journal", "tierd journal --config tierd.yaml [--after SEQ] [--limit N]", args, stderr, 0,
		func(fs *flag.FlagSet) {
			fs.Int64Var(&after, "after", 0, "print the entries after this sequence number")
			fs.Int64Var(&limit, "limit", 0, "print at most this many entries (0: all)")
		},
		func(ctx context.Context, a tierdpb.AdminClient, _ string, _ []string) error {
			if after < 0 || limit < 0 || limit > math.MaxInt32 {
				return fmt.Errorf("--after %d and --limit %d: want 0 or more, and a limit up to %d", after, limit, math.MaxInt32)
			}
			resp, err := a.Journal(ctx, &tierdpb.JournalRequest{AfterSeq: after, Limit: int32(limit)})
			if err != nil {
				return err
			}
			if len(resp.GetEntries()) == 0 { // stdout stays JSON lines only
				fmt.Fprintf(stderr, "no journal entries after sequence number %d\n", after)
			}
			enc := json.NewEncoder(stdout)
			for _, e := range resp.GetEntries() {
				if err := enc.Encode(journalFromProto(e)); err != nil {
					return err
				}
			}
			return nil
		})
}

// journalFromProto gives an entry the JSON shape it is stored with.
func journalFromProto(e *tierdpb.JournalEntry) remotelog.JournalEntry {
	return remotelog.JournalEntry{Seq: e.GetSeq(), TimeMs: e.GetTimeMs(), Event: e.GetEvent(),
		TopicPartition: remotelog.TopicPartition{Topic: e.GetTopic(), Partition: e.GetPartition()}, TopicID: e.GetTopicId(),
		Reason: remotelog.DeletionReason(e.GetReason()), Proof: e.GetProof(), DueMs: e.GetDueMs(), Segments: int(e.GetSegments()),
		Bytes: e.GetBytes(), Detail: e.GetDetail()}
}

// verb checks a command's first argument (its verb): ok when it is want;
// otherwise the usage is printed and code is the exit status (0 after a
// request for help).
func verb(args []string, want, usage string, stderr io.Writer) (code int, ok bool) {
	if len(args) > 0 && args[0] == want {
		return 0, true
	}
	fmt.Fprintln(stderr, "usage: "+usage)
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		return 0, false
	}
	return 2, false
}

func runTopics(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const usage = "tierd topics delete --config tierd.yaml [--topic-id ID] TOPIC"
	if code, ok := verb(args, "delete", usage, stderr); !ok {
		return code
	}
	var topicID string
	return adminCommand(ctx, "topics delete", usage, args[1:], stderr, 1,
		func(fs *flag.FlagSet) {
			fs.StringVar(&topicID, "topic-id", "", "delete only the copies of this incarnation (topic id); default: the recorded one")
		},
		func(ctx context.Context, a tierdpb.AdminClient, source string, rest []string) error {
			resp, err := a.DeleteTopic(ctx, &tierdpb.DeleteTopicRequest{Topic: rest[0], TopicId: topicID})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "scheduled by %s; nothing is deleted before the due time, and 'tierd partitions restore TOPIC-P' cancels it until then:\n", source)
			printDeletions(stdout, resp.GetDeletions())
			return nil
		})
}

func runPartitions(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const usage = "tierd partitions restore --config tierd.yaml [--topic-id ID] TOPIC-PARTITION"
	if code, ok := verb(args, "restore", usage, stderr); !ok {
		return code
	}
	var topicID string
	return adminCommand(ctx, "partitions restore", usage, args[1:], stderr, 1,
		func(fs *flag.FlagSet) {
			fs.StringVar(&topicID, "topic-id", "", "the incarnation to restore, when several are scheduled")
		},
		func(ctx context.Context, a tierdpb.AdminClient, source string, rest []string) error {
			tp, ok := kafkalog.ParsePartitionDir(rest[0])
			if !ok {
				return fmt.Errorf("%q is not TOPIC-PARTITION", rest[0])
			}
			resp, err := a.RestorePartition(ctx, &tierdpb.RestorePartitionRequest{Topic: tp.Topic, Partition: tp.Partition, TopicId: topicID})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "restored by %s; these copies are live again:\n", source)
			printDeletions(stdout, resp.GetDeletions())
			return nil
		})
}

// printDeletions prints scheduled deletions as a table.
func printDeletions(w io.Writer, ds []*tierdpb.PartitionDeletion) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "partition\ttopic id\tcopies\tbytes\tstate\treason\tdue\tproof")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s-%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", d.GetTopic(), d.GetPartition(), orDash(d.GetTopicId()), d.GetSegments(), d.GetBytes(),
			d.GetState(), d.GetReason(), remotelog.DueText(d.GetDueMs()), d.GetProof())
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
