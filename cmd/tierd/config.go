package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tierd/tierd/authz"
	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/fetch"
	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/s3"
	"github.com/tierd/tierd/rsmapi"
)

// config is the tierd.yaml file. Every section keeps its package's
// defaults for the fields it leaves out.
type config struct {
	Copier   copier.Config `yaml:"copier"`
	Bucket   bucketConfig  `yaml:"bucket"`
	Metadata rlmm.Config   `yaml:"metadata"`
	Fetch    fetchConfig   `yaml:"fetch"`
	HTTP     httpConfig    `yaml:"http"`
	// TLS is TLS for tierd's own endpoints (gRPC, HTTP, Kafka listener)
	// and its tools' gRPC client; see tlsConfig. Default: all plaintext.
	TLS tlsConfig `yaml:"tls"`
	// Kafka holds, side by side in one section, the cluster tierd asks
	// for the facts a broker's disk cannot give (see package cluster and
	// copier.WithCluster: partition leadership, topic ids, topic configs;
	// off without bootstrap_servers) and tierd's own read-only Kafka
	// protocol listener (package listener; off without listen).
	Kafka kafkaConfig `yaml:"kafka"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `yaml:"log_level"`
	// MemoryLimitBytes is the Go soft memory limit tierd run sets, bytes,
	// when the GOMEMLIMIT environment variable is unset: 0 (default) means
	// the fetch caches' budgets + the copier's upload buffers + 64 MiB
	// (see memoryLimit); -1 sets none.
	MemoryLimitBytes int64 `yaml:"memory_limit_bytes"`
	// Metrics bounds the per-partition metric series.
	Metrics metricsConfig `yaml:"metrics"`
	// RSM is the endpoint the broker's RemoteStorageManager plugin calls
	// (package rsmapi; kafka-rsm/): the broker tiers its own segments
	// through tierd. Off by default.
	RSM rsmapi.Config `yaml:"rsm"`
	// ACLs authorizes the Kafka listener's clients with Kafka's ACLs
	// (package authz). Off by default.
	ACLs aclConfig `yaml:"acls"`

	// meta is what loading the file learned; nil for a config built in
	// code.
	meta *configMeta
	// keepCreated: tierd run keeps the metadata dir's creation time
	// (copier.Config.MetadataCreatedMs, see metadataCreated); the tools
	// and the demo do not. retentionGoAhead is tierd run
	// --retention-go-ahead.
	keepCreated, retentionGoAhead bool
	// logDirCheck, set by tierd run, says whether a log dir is still the
	// one it locked at start (copier.WithLogDirCheck); nil: no check.
	logDirCheck func(dir string) error
}

type metricsConfig struct {
	// PartitionLabelsMax is how many partitions get series of their own
	// in the per-partition metrics (tierd_remote_*{topic,partition}): the
	// first ones seen since start; every later one shares
	// {topic="_other",partition="-1"}. Default 1000; 0 aggregates all.
	PartitionLabelsMax int `yaml:"partition.labels.max"`
}

// configMeta is where a loaded config came from.
type configMeta struct {
	path string
	// warnings name old spellings the file used (see migrate).
	warnings []string
	// set holds the keys the file sets, by full key ("copier.log_dirs").
	set map[string]bool
	// renamed maps a key set under an old spelling to that spelling.
	renamed map[string]string
}

// warnings returns the file's warnings (old spellings).
func (c config) warnings() []string {
	if c.meta == nil {
		return nil
	}
	return c.meta.warnings
}

// kafkaConfig is the kafka: section: two packages' settings inline.
type kafkaConfig struct {
	Cluster   cluster.Config  `yaml:",inline"`
	Listener  listener.Config `yaml:",inline"`
	Logins    kafkaLogins     `yaml:",inline"`
	Listeners kafkaListeners  `yaml:",inline"`
}

// kafkaLogins is where the Kafka listener's SASL credentials come from.
type kafkaLogins struct {
	// SASLCredentialsFile holds the SCRAM credentials clients log in
	// with (listener/sasl's form; "tierd sasl credential" makes a line),
	// read at start and again on SIGHUP. It must not be readable by other
	// users. Default "": with bootstrap_servers, every login is relayed to
	// the Kafka cluster and judged there (sasl.Relay); without, it is
	// required by sasl.enabled.mechanisms.
	SASLCredentialsFile string `yaml:"sasl.credentials.file"`
	// AllowUnauthenticated lets the Kafka listener serve beyond loopback
	// with nobody authenticated (no sasl.enabled.mechanisms, tls.kafka not
	// mtls) and no acls: every client that reaches it reads every topic
	// served. tierd's own setting. Default false: such a listen address
	// is refused at start.
	AllowUnauthenticated bool `yaml:"allow.unauthenticated"`
}

// aclConfig says where the ACLs that authorize the Kafka listener's
// clients come from, and how they decide (authz.Config: refresh_interval,
// max_stale, super.users, allow.everyone.if.no.acl.found).
type aclConfig struct {
	// Source is "" (default: no authorization; every client reads every
	// topic served), "cluster" (the Kafka cluster's own ACLs, read with
	// DescribeAcls through kafka.bootstrap_servers, whose principal needs
	// DESCRIBE on the Cluster resource) or "file" (File).
	Source string `yaml:"source"`
	// File is an ACL file in the form "kafka-acls --list" prints
	// (internal/kafkaacl), read again every refresh_interval and on
	// SIGHUP; for source "file".
	File         string `yaml:"file"`
	authz.Config `yaml:",inline"`
}

// validate reports the section's problems, k the Kafka section beside it.
func (a aclConfig) validate(k kafkaConfig) []error {
	var errs []error
	switch a.Source {
	case "":
		if a.File != "" {
			errs = append(errs, errors.New("acls: file is set but source is empty: set source: file"))
		}
		return errs
	case "cluster":
		if !k.Cluster.Enabled() {
			errs = append(errs, errors.New("acls: source cluster needs kafka.bootstrap_servers (the cluster to read the ACLs from)"))
		}
	case "file":
		if a.File == "" {
			errs = append(errs, errors.New("acls: source file needs file (the ACL file's path)"))
		}
	default:
		errs = append(errs, fmt.Errorf("acls: source %q: want \"\" (off), cluster or file", a.Source))
	}
	if err := a.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

type httpConfig struct {
	// Listen serves /metrics, /-/healthy, /-/ready and the status page
	// at / (package statuspage). Default
	// "127.0.0.1:7451"; "" turns it off.
	Listen string `yaml:"listen"`
	// Pprof serves Go's runtime profiles (net/http/pprof: CPU, heap,
	// goroutine, block, mutex) under /debug/pprof/ on Listen, and turns
	// on block and mutex profiling (a sampled cost on every contended
	// lock and channel wait). Anyone who can reach Listen can take them:
	// for profiling on a trusted host only. Default false.
	Pprof bool `yaml:"pprof"`
	// TokensFile, when set, makes the status page, /metrics and the
	// profiles answer only requests with "Authorization: Bearer <token>"
	// of one of its tokens (fetch.TokenSet's form, "tierd api token"
	// makes a line; Prometheus sends one with authorization:
	// credentials_file); /-/healthy and /-/ready stay open. Read at start
	// and on SIGHUP; it must not be writable by group or other users.
	// Default "".
	TokensFile string `yaml:"tokens_file"`
}

// bucketConfig picks and configures the object store.
type bucketConfig struct {
	// Type is filesystem (default), minio (minio-go) or s3 (aws-sdk-go-v2).
	Type       string            `yaml:"type"`
	Prefix     string            `yaml:"prefix"`
	Filesystem filesystem.Config `yaml:"filesystem"`
	MinIO      minio.Config      `yaml:"minio"`
	S3         s3.Config         `yaml:"s3"`
}

func defaultConfig() config {
	return config{
		Copier: copier.DefaultConfig(), Fetch: fetchConfig{Config: fetch.DefaultConfig()}, LogLevel: "info", Metadata: rlmm.DefaultConfig(),
		Kafka:  kafkaConfig{Cluster: cluster.DefaultConfig(), Listener: listener.DefaultConfig()},
		Bucket: bucketConfig{Type: "filesystem", MinIO: minio.DefaultConfig(), S3: s3.DefaultConfig()},
		HTTP:   httpConfig{Listen: "127.0.0.1:7451"}, Metrics: metricsConfig{PartitionLabelsMax: partlabels.DefaultMax},
		RSM: rsmapi.DefaultConfig(), ACLs: aclConfig{Config: authz.DefaultConfig()},
	}
}

// loadConfig reads a YAML file strictly: unknown keys (with the nearest
// known one suggested), values of the wrong kind, fractional numbers
// (outside the few settings that are fractions, see fractional: truncating
// a whole-number setting would silently change its meaning) and extra documents are errors, all reported at
// once. Old spellings are converted, with warnings (see migrate).
func loadConfig(path string) (config, error) {
	cfg := defaultConfig()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return cfg, fmt.Errorf("%s: the config file is empty (see tierd.example.yaml)", path)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("%s: the config file holds no settings (see tierd.example.yaml)", path)
	} else if err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("%s: more than one YAML document; tierd reads one", path)
	}
	if err := noFloats(&root); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	renamed := map[string]string{}
	warnings, errs := migrate(&root, renamed)
	if len(root.Content) == 1 {
		errs = append(errs, checkKeys(root.Content[0], reflect.TypeFor[config](), "")...)
	}
	if len(errs) > 0 {
		return cfg, fmt.Errorf("%s: %w", path, errors.Join(errs...))
	}
	// Decoded strictly once more from the converted file: a safety net
	// for anything checkKeys let through.
	converted, err := yaml.Marshal(&root)
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	strict := yaml.NewDecoder(bytes.NewReader(converted))
	strict.KnownFields(true)
	if err := strict.Decode(&cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	cfg.meta = &configMeta{path: abs, warnings: warnings, set: map[string]bool{}, renamed: renamed}
	fileKeys(&root, "", cfg.meta.set)
	cfg.Copier.Source = abs
	if err := cfg.validate(); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

func noFloats(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!float" && !integral(n) { // too large a whole number: checkValue says so
		return fmt.Errorf("line %d: %q: settings are whole numbers", n.Line, n.Value)
	}
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 1 && fractional[n.Content[i-1].Value] {
			continue
		}
		if err := noFloats(c); err != nil {
			return err
		}
	}
	return nil
}

// fractional names the settings that are fractions, as Kafka's are:
// min.cleanable.dirty.ratio (copier.remote_compaction).
var fractional = map[string]bool{"min.cleanable.dirty.ratio": true}

func (c config) validate() error {
	errs := []error{c.Copier.Validate(), c.Fetch.Validate(), (rsm.Config{Prefix: c.Bucket.Prefix}).Validate()}
	if err := c.Kafka.Listener.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("kafka: %w", err))
	}
	if c.Kafka.Cluster.Enabled() {
		if err := c.Kafka.Cluster.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("kafka: %w", err))
		}
		if c.Copier.BrokerID < 0 {
			errs = append(errs, errors.New("copier: broker_id is required with kafka.bootstrap_servers: tierd tiers the partitions this broker leads"))
		}
	}
	errs = append(errs, c.ACLs.validate(c.Kafka)...)
	if c.Kafka.Listener.SASL() && c.Kafka.Logins.SASLCredentialsFile == "" && !c.Kafka.Cluster.Enabled() {
		errs = append(errs, errors.New("kafka: sasl.enabled.mechanisms needs bootstrap_servers (logins checked by the Kafka cluster) or sasl.credentials.file (the credentials clients log in with)"))
	}
	errs = append(errs, c.validateListeners()...)
	if !c.Kafka.Listener.SASL() && c.Kafka.Logins.SASLCredentialsFile != "" {
		errs = append(errs, errors.New("kafka: sasl.credentials.file is set but sasl.enabled.mechanisms is empty: no client would log in"))
	}
	if c.Metrics.PartitionLabelsMax < 0 {
		errs = append(errs, fmt.Errorf("metrics: partition.labels.max %d must be 0 or more", c.Metrics.PartitionLabelsMax))
	}
	if c.MemoryLimitBytes < -1 {
		errs = append(errs, fmt.Errorf("memory_limit_bytes %d must be -1 (none), 0 (automatic) or a size", c.MemoryLimitBytes))
	}
	if err := c.Metadata.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("metadata: %w", err))
	}
	switch c.Bucket.Type {
	case "filesystem":
		errs = append(errs, c.Bucket.Filesystem.Validate())
	case "minio":
		errs = append(errs, c.Bucket.MinIO.Validate())
	case "s3":
		errs = append(errs, c.Bucket.S3.Validate())
	default:
		errs = append(errs, fmt.Errorf("bucket: type %q: want filesystem, minio or s3", c.Bucket.Type))
	}
	if c.HTTP.Listen != "" {
		if err := fetch.CheckListen(c.HTTP.Listen); err != nil {
			errs = append(errs, fmt.Errorf("http: %w", err))
		}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.TLS.validate(), c.RSM.Validate(), c.Fetch.Auth.validate())
	if len(c.Copier.LogDirs) == 0 && !c.RSM.Enabled {
		errs = append(errs, errors.New("copier: log_dirs is required (the Kafka log dirs tierd's copier tiers), unless rsm.enabled serves a broker's RemoteStorageManager plugin"))
	}
	if c.RSM.Enabled {
		errs = append(errs, rsmapi.Overlap(c.RSM.LogDirs, c.Copier.LogDirs))
		for _, l := range []struct{ name, addr string }{{"fetch.listen", c.Fetch.Listen}, {"http.listen", c.HTTP.Listen}, {"kafka.listen", c.Kafka.Listener.Listen}} {
			if l.addr != "" && l.addr == c.RSM.Listen {
				errs = append(errs, fmt.Errorf("rsm: listen %s is %s too", c.RSM.Listen, l.name))
			}
		}
	}
	if mode(c.TLS.RSM) != tlsOff && !c.RSM.Enabled {
		errs = append(errs, errors.New("tls: rsm is on but rsm.enabled is false"))
	}
	return errors.Join(errs...)
}

// rsmStagingDir is rsm.staging_dir, or its default under metadata.dir.
func (c config) rsmStagingDir() string {
	if c.RSM.StagingDir != "" {
		return c.RSM.StagingDir
	}
	return filepath.Join(c.Metadata.Dir, "rsm-staging")
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return l, fmt.Errorf("log_level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// openBucket builds the configured bucket.
func openBucket(ctx context.Context, c bucketConfig) (rsm.Bucket, error) {
	switch c.Type {
	case "minio":
		return minio.New(c.MinIO, nil)
	case "s3":
		return s3.New(ctx, c.S3, nil)
	}
	return filesystem.Open(c.Filesystem) // never creates it: see "tierd bucket create"
}

// configCommand parses a subcommand's "--config FILE" (and the flags setup
// adds) and loads the config. When ok is false the command ends with code
// (0 after -h, 2 for usage errors, 1 for a bad config), the reason already
// printed to stderr.
func configCommand(name, usage string, args []string, stderr io.Writer, setup func(*flag.FlagSet)) (cfg config, code int, ok bool) {
	return configCommandArgs(name, usage, args, stderr, setup, nil)
}

// configCommandArgs is configCommand for a subcommand that takes
// positional arguments after its flags: they are stored in *rest (nil
// rest: none allowed).
func configCommandArgs(name, usage string, args []string, stderr io.Writer, setup func(*flag.FlagSet), rest *[]string) (cfg config, code int, ok bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "path of the YAML config file (required); see tierd.example.yaml")
	if setup != nil {
		setup(fs)
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: "+usage)
		fs.PrintDefaults()
	}
	// Flags may come before and after positional arguments
	// ("topics delete orders --config tierd.yaml").
	var positional []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			return cfg, 0, false
		} else if err != nil {
			return cfg, 2, false
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if *path == "" || (rest == nil && len(positional) > 0) {
		fmt.Fprintln(stderr, "usage: "+usage)
		return cfg, 2, false
	}
	if rest != nil {
		*rest = positional
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintf(stderr, "tierd %s: %v\n", name, err)
		return cfg, 1, false
	}
	for _, w := range cfg.warnings() {
		fmt.Fprintf(stderr, "tierd %s: warning: %s: %s\n", name, *path, w)
	}
	return cfg, 0, true
}
