package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/remoteread"
	"github.com/tierd/tierd/remoteread/cache"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsmapi"
)

// rsmEndpoint builds the RSM endpoint (rsm.enabled) over the daemon's
// metadata store (its catalogue of broker-owned copies) and bucket (under
// <bucket.prefix>/<rsm.prefix>), its metrics bounded with the copier's
// and fetch's. It refuses to start when a topic has both broker-owned
// copies and tierd's own (a topic is tiered one way only), and refuses at
// every copy a topic tierd's copier tiers (409 TIERED_BY_SIDECAR).
func (d *Parts) rsmEndpoint(cfg config.Config, log *slog.Logger, tc *tls.Config) (*rsmapi.Server, error) {
	if err := tieredBothWays(d.Store); err != nil {
		return nil, err
	}
	mgr, err := rsm.NewManager(d.Bucket, rsm.Config{Prefix: rsmapi.BrokerPrefix(cfg.Bucket.Prefix, cfg.RSM.Prefix)})
	if err != nil {
		return nil, err
	}
	for _, dir := range cfg.RSM.LogDirs {
		if _, err := os.Stat(dir); err != nil {
			log.Warn("rsm: a broker log dir is not there (yet?): copies by path from it are refused until it is", "dir", dir, "err", err)
		}
	}
	rc := cfg.RSM
	rc.StagingDir = cfg.RSMStagingDir()
	opts := []rsmapi.Option{rsmapi.WithLogger(log.With("component", "rsm")), rsmapi.WithRegisterer(d.Registerer),
		rsmapi.WithPartitionLabels(d.Labels), rsmapi.WithReadiness(d.readiness), rsmapi.WithTLS(tc),
		rsmapi.WithSidecarTopics(sidecarTopics(d.Store, cfg.Copier.LogDirs)), rsmapi.WithLogReader(logRange{s: d.API.Engine(), src: mgr})}
	return rsmapi.New(rc, d.Store, rsmapi.NewStorage(mgr), opts...)
}

// logRange reads the broker-owned copies' .log through the read
// engine's chunk cache and read-ahead (one memory budget with tierd's own
// reads), from the broker copies' rsm.Manager: rsmapi.LogReader.
type logRange struct {
	s   *remoteread.Engine
	src remoteread.LogSource
}

// WriteLogRange implements rsmapi.LogReader. The engine's error classes
// become the endpoint's: an object shorter than its size is damaged
// data (500), a start past the end 416; missing objects and store
// failures keep their causes (404, 503).
func (l logRange) WriteLogRange(ctx context.Context, meta remotelog.SegmentMetadata, start, n int64, w io.Writer) (int64, error) {
	written, err := l.s.WriteLogRange(ctx, l.src, meta, start, n, w)
	switch {
	case err == nil:
	case errors.Is(err, cache.ErrShortObject):
		err = fmt.Errorf("%w: %w", rsmapi.ErrDataLoss, err)
	case errors.Is(err, remoteread.ErrPastEnd):
		err = fmt.Errorf("%w: %w", rsmapi.ErrRangeNotSatisfiable, err)
	}
	return written, err
}

// tieredBothWays refuses a metadata store in which a topic has both
// broker-owned copies (the RSM endpoint's) and tierd's own (its copier's).
func tieredBothWays(s *rlmm.Store) error {
	own, err := s.Partitions()
	if err != nil {
		return err
	}
	brokers, err := s.BrokerPartitions()
	if err != nil {
		return err
	}
	mine := map[string]bool{}
	for _, tp := range own {
		mine[tp.Topic] = true
	}
	var both []string
	for _, tp := range brokers {
		if mine[tp.Topic] && !slices.Contains(both, tp.Topic) {
			both = append(both, tp.Topic)
		}
	}
	if len(both) == 0 {
		return nil
	}
	sort.Strings(both)
	return fmt.Errorf("rsm: topic %s has both broker-owned copies (made through the RSM endpoint) and tierd's own (its copier's): "+
		"a topic is tiered one way only; stop tiering it with one of them (copier.log_dirs or the broker's remote.storage.enable), "+
		"and delete that way's copies ('tierd topics delete' for tierd's, the broker's own retention for the broker's)", strings.Join(both, ", "))
}

// sidecarTopics returns the test of whether tierd's copier tiers a topic:
// it has rows in tierd's own metadata, or partition directories in
// copier.log_dirs.
func sidecarTopics(s *rlmm.Store, logDirs []string) func(topic string) bool {
	return func(topic string) bool {
		if tps, err := s.Partitions(); err == nil {
			for _, tp := range tps {
				if tp.Topic == topic {
					return true
				}
			}
		}
		for _, dir := range logDirs {
			ents, err := os.ReadDir(dir)
			if err != nil {
				continue
			}
			for _, e := range ents {
				if tp, ok := kafkalog.ParsePartitionDir(e.Name()); ok && tp.Topic == topic && e.IsDir() {
					return true
				}
			}
		}
		return false
	}
}
