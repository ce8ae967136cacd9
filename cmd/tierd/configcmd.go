package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/internal/instance"
	"github.com/tierd/tierd/internal/kafkalog"
)

const configUsage = `usage: tierd config show --config tierd.yaml [--cluster=false]
       tierd config reload --config tierd.yaml [--timeout 30s]

show:   every setting with its value, where the value comes from (file or
        default) and whether a running tierd takes a change on reload
        (dynamic) or needs a restart (static); then, per topic, the
        retention and tiering a pass applies, with each value's source
        (default, file, or the Kafka cluster's topic configs, asked when
        kafka.bootstrap_servers is set unless --cluster=false).
reload: checks the file, then sends SIGHUP to the tierd holding the
        config's log dirs (its pid from <log dir>/.tierd.lock) and prints
        what it applied and what it refused (static settings: restart
        needed). Exit status 1 when something was refused or failed.`

// runConfig is "tierd config show|reload".
func runConfig(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := stderr
		if len(args) > 0 {
			w = stdout
		}
		fmt.Fprintln(w, configUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "show":
		var askCluster bool
		cfg, code, ok := configCommand("config show", "tierd config show --config tierd.yaml [--cluster=false]", args[1:], stderr, func(fs *flag.FlagSet) {
			fs.BoolVar(&askCluster, "cluster", true, "ask the Kafka cluster (kafka.bootstrap_servers) for the topics' configs")
		})
		if !ok {
			return code
		}
		if err := showConfig(ctx, cfg, askCluster, stdout); err != nil {
			fmt.Fprintf(stderr, "tierd config show: %v\n", err)
			return 1
		}
		return 0
	case "reload":
		var timeout time.Duration
		cfg, code, ok := configCommand("config reload", "tierd config reload --config tierd.yaml [--timeout 30s]", args[1:], stderr, func(fs *flag.FlagSet) {
			fs.DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the running tierd's answer")
		})
		if !ok {
			return code
		}
		return reloadRunning(ctx, cfg, timeout, stdout, stderr)
	}
	fmt.Fprintf(stderr, "tierd config: unknown subcommand %q\n%s\n", args[0], configUsage)
	return 2
}

// reloadRunning signals the tierd holding cfg's log dirs to reload and
// prints what it did.
func reloadRunning(ctx context.Context, cfg config.Config, timeout time.Duration, stdout, stderr io.Writer) int {
	h, err := instance.Running(cfg.Copier.LogDirs)
	if len(cfg.Copier.LogDirs) == 0 {
		h, err = runningOnMetadataDir(cfg.Metadata.Dir)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tierd config reload: %v; nothing to reload (a stopped tierd reads the file when it starts)\n", err)
		return 1
	}
	prev, _ := daemon.ReadReload(cfg.Metadata.Dir)
	if err := syscall.Kill(h.PID, syscall.SIGHUP); err != nil {
		fmt.Fprintf(stderr, "tierd config reload: signal tierd pid %d: %v\n", h.PID, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		res, ok := daemon.ReadReload(cfg.Metadata.Dir)
		if ok && res.PID == h.PID && (prev.PID != h.PID || res.Seq > prev.Seq) {
			fmt.Fprint(stdout, res.Describe())
			if p := cfg.Path(); res.File != "" && res.File != p {
				fmt.Fprintf(stdout, "note: that tierd reads %s, not %s\n", res.File, p)
			}
			if res.Error != "" || len(res.Refused) > 0 {
				return 1
			}
			return 0
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "tierd config reload: sent SIGHUP to tierd pid %d (%s); no answer in %s in %s: see its log\n",
				h.PID, h, timeout, filepath.Join(cfg.Metadata.Dir, daemon.ReloadFile))
			return 1
		case <-t.C:
		}
	}
}

// showConfig prints every setting and, per topic, what a pass applies.
func showConfig(ctx context.Context, cfg config.Config, askCluster bool, w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "# %s: every setting, its source, and what a reload does with a change\n", cfg.Path())
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE\tON RELOAD")
	for _, s := range config.Flatten(cfg) {
		reload := "restart needed"
		if config.DynamicKey(s.Key) && (s.Key != config.DiskBudgetKey || cfg.Fetch.DiskBudgetDynamic(cfg.Fetch.Config)) {
			reload = "dynamic"
		}
		src := cfg.Source(s.Key)
		if s.Value == "-" {
			src = "not set: inherited"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Key, s.Value, src, reload)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	names := configTopics(cfg)
	configs, note := clusterConfigs(ctx, cfg, askCluster, names)
	for t := range configs {
		if !strings.HasPrefix(t, "__") && !contains(names, t) {
			names = append(names, t)
		}
	}
	sort.Strings(names)
	fmt.Fprintf(tw, "\n# per topic, as a pass applies it (%s)\n", note)
	fmt.Fprintln(tw, "TOPIC\tSETTING\tVALUE\tSOURCE")
	defaults := cfg.Copier.TopicDefaults()
	for _, t := range names {
		for _, v := range topics.Resolve(t, defaults, cfg.Copier.Topics[t], configs[t]).Explain() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t, v.Name, v.Value, topicSource(cfg, v.From))
		}
	}
	return tw.Flush()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// topicSource turns a topics.Value's From into a source for people.
func topicSource(c config.Config, from string) string {
	switch {
	case from == "default":
		return "default"
	case strings.HasPrefix(from, "cluster "):
		return "cluster (" + strings.TrimPrefix(from, "cluster ") + ")"
	case strings.HasPrefix(from, "copier.topics."):
		return "file (" + from + ")"
	}
	if c.Source(from) == "default" {
		return "default (" + from + ")"
	}
	return "file (" + from + ")"
}

// configTopics are the topics tierd.yaml names and those with partition
// directories in the log dirs (internal ones left out).
func configTopics(cfg config.Config) []string {
	seen := map[string]bool{}
	var out []string
	add := func(t string) {
		if !seen[t] && !strings.HasPrefix(t, "__") {
			seen[t] = true
			out = append(out, t)
		}
	}
	for t := range cfg.Copier.Topics {
		add(t)
	}
	for _, d := range cfg.Copier.LogDirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if tp, ok := kafkalog.ParsePartitionDir(e.Name()); ok && e.IsDir() {
				add(tp.Topic)
			}
		}
	}
	return out
}

// clusterConfigs asks the cluster for the topics' configs, when it is
// configured and asked for; note says what was done.
func clusterConfigs(ctx context.Context, cfg config.Config, ask bool, topics []string) (map[string]map[string]cluster.ConfigValue, string) {
	switch {
	case !cfg.Kafka.Cluster.Enabled():
		return nil, "no kafka.bootstrap_servers: no cluster configs"
	case !cfg.Copier.ClusterTopicConfigs:
		return nil, "copier.cluster_topic_configs is false: the cluster's topic configs are not applied"
	case !ask:
		return nil, "--cluster=false: the cluster was not asked"
	}
	cl, err := cluster.New(cfg.Kafka.Cluster, cluster.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, "cluster: " + err.Error()
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*cfg.Kafka.Cluster.RequestTimeout)
	defer cancel()
	v, err := cl.Describe(ctx, topics)
	if err != nil {
		return nil, "cluster unreachable, its configs not shown: " + err.Error()
	}
	out := map[string]map[string]cluster.ConfigValue{}
	var failed []string
	for name, t := range v.Topics {
		if t.Configs != nil {
			out[name] = t.Configs
		} else if t.ConfigErr != nil && contains(topics, name) {
			failed = append(failed, fmt.Sprintf("%s: %v", name, t.ConfigErr))
		}
	}
	note := fmt.Sprintf("cluster %s answered, %s", v.ClusterID, v.Source)
	if len(failed) > 0 {
		note += "; configs unreadable for " + strings.Join(failed, ", ")
	}
	return out, note
}

// runningOnMetadataDir finds the tierd that runs with metadata dir dir,
// for a tierd with no log dirs of its own (one that serves only the RSM
// endpoint): the pid its runtime file records, alive, holding the
// metadata store's lock file (so not another process that took the pid).
// Errors: instance.ErrNotRunning, wrapped, saying why.
func runningOnMetadataDir(dir string) (instance.Holder, error) {
	info, ok := daemon.ReadRuntime(dir)
	lock := filepath.Join(dir, "LOCK") // Pebble's, held while the store is open
	switch {
	case !ok:
		return instance.Holder{}, fmt.Errorf("%w: no log dirs configured, and %s names no live process", instance.ErrNotRunning, filepath.Join(dir, daemon.RuntimeFile))
	case !instance.HoldsOpen(info.PID, lock):
		return instance.Holder{}, fmt.Errorf("%w: no log dirs configured, and pid %d (from %s) does not hold %s", instance.ErrNotRunning,
			info.PID, filepath.Join(dir, daemon.RuntimeFile), lock)
	}
	host, _ := os.Hostname()
	return instance.Holder{PID: info.PID, Host: host}, nil
}
