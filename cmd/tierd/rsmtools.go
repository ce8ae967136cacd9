package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/daemon/statuspage"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/tlsreload"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsmapi"
)

// rsmClient returns a client of the RSM endpoint at rsm.listen (a
// wildcard host reached on loopback), with the token of rsm.token_file,
// over TLS when tls.rsm is not off (trusting tls.ca_file, presenting
// tls.client_cert_file to an mtls endpoint).
func rsmClient(cfg config.Config) (*rsmapi.Client, error) {
	tok, err := rsmapi.ReadToken(cfg.RSM.TokenFile)
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(cfg.RSM.Listen)
	if err != nil {
		return nil, fmt.Errorf("rsm: listen: %w", err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	if config.Mode(cfg.TLS.RSM) == config.TLSOff {
		return rsmapi.NewClient("http://"+net.JoinHostPort(host, port), tok, nil), nil
	}
	t := cfg.TLS
	tc, err := tlsreload.ClientConfig(tlsreload.ClientFiles{CAFile: t.CAFile, CertFile: t.ClientCertFile, KeyFile: t.ClientKeyFile, ServerName: t.ServerName})
	if err != nil {
		return nil, fmt.Errorf("tls: the tools' client settings: %w", err)
	}
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	return rsmapi.NewClient("https://"+net.JoinHostPort(host, port), tok, tc), nil
}

// rsmStatus asks the running tierd's RSM endpoint for its status; source
// says where the status came from.
func rsmStatus(ctx context.Context, cfg config.Config) (st rsmapi.Status, source string, err error) {
	c, err := rsmClient(cfg)
	if err != nil {
		return st, "", err
	}
	defer c.Close()
	st, err = c.Status(ctx)
	if err != nil {
		return st, "", fmt.Errorf("the RSM endpoint at %s (rsm.listen) does not answer: %w", cfg.RSM.Listen, err)
	}
	return st, "the RSM endpoint at " + cfg.RSM.Listen, nil
}

// printRSMStatus prints the RSM endpoint's part of "tierd status": where
// it listens, the broker-owned copies stored, in flight and unfinished,
// the requests and failures since start, and a line per partition.
func printRSMStatus(w io.Writer, st rsmapi.Status, source string, now time.Time) {
	scheme := "http"
	if st.TLS {
		scheme = "https"
	}
	fmt.Fprintf(w, "\nbroker-owned copies (RSM endpoint %s://%s, prefix %s; the broker's __remote_log_metadata is their truth), from %s:\n",
		scheme, st.Listen, st.Prefix, source)
	holding := 0
	for _, p := range st.Partitions {
		if p.Stored > 0 {
			holding++
		}
	}
	fmt.Fprintf(w, "  %s stored (%s) over %s, %d in flight, %d unfinished (deleted by the janitor)\n",
		plural(st.Stored, "copy", "copies"), statuspage.SizeText(st.StoredBytes), plural(holding, "partition", "partitions"),
		st.CopiesInFlight, st.Unfinished)
	fmt.Fprintf(w, "  since start: %d copies (%d failed), %d reads (%d failed), %d deletes (%d failed), %d refused for the token\n",
		st.Copies, st.CopyErrors, st.Fetches, st.FetchErrors, st.Deletes, st.DeleteErrors, st.AuthFailures)
	if st.LastError != "" {
		fmt.Fprintf(w, "  last error %s: %s\n", ago(st.LastErrorMs, now), st.LastError)
	}
	if st.CatalogueError != "" {
		fmt.Fprintf(w, "  the catalogue could not be read: %s\n", st.CatalogueError)
	}
	for _, p := range st.Partitions {
		var extra []string
		if p.Started > 0 {
			extra = append(extra, fmt.Sprintf("%d COPY_SEGMENT_STARTED", p.Started))
		}
		if p.Deleting > 0 {
			extra = append(extra, fmt.Sprintf("%d DELETE_SEGMENT_STARTED", p.Deleting))
		}
		rng := "-"
		if p.Stored > 0 {
			rng = fmt.Sprintf("%d-%d", p.StartOffset, p.EndOffset)
		}
		line := fmt.Sprintf("  %s-%d: %s (%s), offsets %s, last copy %s", p.Topic, p.Partition, plural(p.Stored, "copy", "copies"),
			statuspage.SizeText(p.Bytes), rng, ago(p.LastCopyMs, now))
		if len(extra) > 0 {
			line += "; " + strings.Join(extra, ", ")
		}
		fmt.Fprintln(w, line)
	}
}

// showRSMStatus prints the RSM endpoint's part of "tierd status": the
// running endpoint's status, or, when no tierd runs, what a stopped one's
// metadata store holds of broker-owned copies; or why there is neither.
func showRSMStatus(ctx context.Context, cfg config.Config, w io.Writer) {
	st, source, err := rsmStatus(ctx, cfg)
	if err != nil {
		if c, _, derr := dialRunning(ctx, cfg); derr == nil && c == nil {
			st, source, err = offlineRSMStatus(ctx, cfg)
		} else if c != nil {
			c.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(w, "\nbroker-owned copies: %v\n", err)
		return
	}
	printRSMStatus(w, st, source, time.Now())
}

// offlineRSMStatus sums the broker-owned copies a stopped tierd's
// metadata store records (nothing in flight, no request counts).
func offlineRSMStatus(ctx context.Context, cfg config.Config) (rsmapi.Status, string, error) {
	st := rsmapi.Status{Listen: cfg.RSM.Listen + " (not running)", TLS: config.Mode(cfg.TLS.RSM) != config.TLSOff, Prefix: cfg.RSM.Prefix}
	if err := metadataPresent(cfg); err != nil {
		return st, "", err
	}
	s, err := daemon.OpenStore(ctx, cfg)
	if err != nil {
		return st, "", fmt.Errorf("no tierd runs, and the metadata store cannot be opened: %w", err)
	}
	defer s.Close()
	tps, err := s.BrokerPartitions()
	if err != nil {
		return st, "", err
	}
	for _, tp := range tps {
		rows, err := s.BrokerCopies(tp)
		if err != nil {
			return st, "", err
		}
		p := rsmapi.Summarize(tp, rows)
		st.Stored += p.Stored
		st.StoredBytes += p.Bytes
		st.Unfinished += p.Started + p.Deleting
		st.Partitions = append(st.Partitions, p)
	}
	return st, cfg.Metadata.Dir + " (tierd not running)", nil
}

// brokerRows reads the catalogue of broker-owned copies: from the
// running tierd's RSM endpoint, or from a stopped one's metadata store.
type brokerRows interface {
	partitions(ctx context.Context) ([]remotelog.TopicPartition, error)
	rows(ctx context.Context, tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
}

type clientRows struct{ c *rsmapi.Client }

func (c clientRows) partitions(ctx context.Context) ([]remotelog.TopicPartition, error) {
	st, err := c.c.Status(ctx)
	var out []remotelog.TopicPartition
	for _, p := range st.Partitions {
		out = append(out, remotelog.TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	return out, err
}

func (c clientRows) rows(ctx context.Context, tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	return c.c.Rows(ctx, tp)
}

type storeRows struct{ s *rlmm.Store }

func (s storeRows) partitions(context.Context) ([]remotelog.TopicPartition, error) {
	tps, err := s.s.BrokerPartitions()
	sort.Slice(tps, func(i, j int) bool { return tps[i].String() < tps[j].String() })
	return tps, err
}

func (s storeRows) rows(_ context.Context, tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	return s.s.BrokerCopies(tp)
}

// brokerRowsFor returns where "tierd segments" reads broker-owned copies
// from, given where it read tierd's own: the same stopped metadata store,
// or the running tierd's RSM endpoint (when rsm.enabled); nil when there
// is none, with why in the string.
func brokerRowsFor(cfg config.Config, ls lister) (brokerRows, string, func(), error) {
	if s, ok := ls.(*storeLister); ok {
		return storeRows{s.s}, cfg.Metadata.Dir + " (tierd not running)", func() {}, nil
	}
	if !cfg.RSM.Enabled {
		return nil, "", func() {}, nil
	}
	c, err := rsmClient(cfg)
	if err != nil {
		return nil, "", func() {}, err
	}
	return clientRows{c}, "the RSM endpoint at " + cfg.RSM.Listen, c.Close, nil
}

// listBrokerCopies prints the broker-owned copies per partition, labelled
// as the broker's: made by the broker's RemoteStorageManager plugin
// through the RSM endpoint, their truth the broker's own remote log
// metadata. Nothing is printed when there are none and the endpoint is
// off.
func listBrokerCopies(ctx context.Context, cfg config.Config, ls lister, w io.Writer) error {
	br, source, closeFn, err := brokerRowsFor(cfg, ls)
	if err != nil {
		return fmt.Errorf("broker-owned copies: %w", err)
	}
	defer closeFn()
	if br == nil {
		return nil
	}
	tps, err := br.partitions(ctx)
	if err != nil {
		return fmt.Errorf("broker-owned copies: %w", err)
	}
	if len(tps) == 0 && !cfg.RSM.Enabled {
		return nil
	}
	fmt.Fprintf(w, "\nbroker-owned copies (the broker's: copied by its RemoteStorageManager plugin through the RSM endpoint; "+
		"its __remote_log_metadata is their truth), from %s:\n", source)
	if len(tps) == 0 {
		fmt.Fprintln(w, "none")
	}
	for _, tp := range tps {
		rows, err := br.rows(ctx, tp)
		if err != nil {
			return fmt.Errorf("broker-owned copies of %s: %w", tp, err)
		}
		p := rsmapi.Summarize(tp, rows)
		fmt.Fprintf(w, "\n%s (broker's): %s stored (%s)\n", tp, plural(p.Stored, "copy", "copies"), statuspage.SizeText(p.Bytes))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "base offset\tlast offset\tbytes\tstate\tsegment id\t")
		for _, r := range rows {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t\n", r.StartOffset, r.EndOffset, r.SizeInBytes, r.State, r.ID)
		}
		tw.Flush()
	}
	return nil
}

// brokerCopiesToVerify lists the broker-owned copies "tierd verify"
// checks: every manifest under the RSM endpoint's prefix (of topic, when
// set), read from the bucket, so that they are checked whatever tierd's
// catalogue holds. Manifests that do not read are returned apart, each
// an error naming its key. Errors: the bucket's listing.
func brokerCopiesToVerify(ctx context.Context, bm *rsm.Manager, topic string) ([]verifyItem, []error, error) {
	tps, err := bm.Partitions(ctx)
	if err != nil {
		if cerr := bm.CheckStore(ctx); errors.Is(cerr, rsm.ErrMisconfigured) {
			err = cerr // says what is wrong (no bucket, the credentials and where they came from) and how to fix it
		}
		return nil, nil, fmt.Errorf("list the broker-owned copies: %w", err)
	}
	var items []verifyItem
	var bad []error
	for _, tp := range tps {
		if topic != "" && tp.Topic != topic {
			continue
		}
		mfs, err := bm.Manifests(ctx, tp)
		if err != nil {
			bad = append(bad, err)
		}
		for _, mf := range mfs {
			items = append(items, verifyItem{meta: mf.Metadata(), broker: true})
		}
	}
	return items, bad, nil
}

// brokerStillStored says whether a broker-owned copy's manifest is still
// stored (the broker may delete the copy while it is verified); when that
// cannot be told, it says yes.
func brokerStillStored(ctx context.Context, bm *rsm.Manager, meta remotelog.SegmentMetadata) bool {
	_, err := bm.ReadManifest(ctx, bm.Key(meta, rsm.ManifestSuffix))
	return !errors.Is(err, rsm.ErrNotFound)
}

// brokerText says how many of the copies verified are broker-owned, and
// under which prefix; "" when none is.
func brokerText(items []verifyItem, prefix string) string {
	n := 0
	for _, it := range items {
		if it.broker {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d of them broker-owned (manifests under %s/)", n, prefix)
}
