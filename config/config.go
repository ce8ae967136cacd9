package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tierd/tierd/authz"
	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/internal/saturate"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/chunked"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/s3"
	"github.com/tierd/tierd/rsmapi"
)

// Config is the tierd.yaml file. Every section keeps its package's
// defaults for the fields it leaves out (see Default).
type Config struct {
	// Copier is the copier (package copier): the log dirs it tiers and
	// how often, ownership, retention, tiering per topic and remote
	// compaction.
	Copier copier.Config `yaml:"copier"`
	// Bucket is the object store the copies go to.
	Bucket Bucket `yaml:"bucket"`
	// Objects is how new copies are stored (chunked, compressed,
	// encrypted) and the keys of encrypted copies.
	Objects Objects `yaml:"objects"`
	// Metadata is the metadata store (package rlmm): the copies' rows and
	// the partitions' offsets, in Pebble.
	Metadata rlmm.Config `yaml:"metadata"`
	// Fetch is the remote read engine and the gRPC API on fetch.listen
	// (packages remoteread and fetch), and who may call it.
	Fetch Fetch `yaml:"fetch"`
	// HTTP is the HTTP endpoint: metrics, health, readiness, the status
	// page and, when asked for, Go's profiles.
	HTTP HTTP `yaml:"http"`
	// TLS is TLS for tierd's own endpoints (gRPC, HTTP, Kafka listener)
	// and its tools' gRPC client; see type TLS. Default: all plaintext.
	TLS TLS `yaml:"tls"`
	// Kafka holds, side by side in one section, the cluster tierd asks
	// for the facts a broker's disk cannot give (see package cluster and
	// copier.WithCluster: partition leadership, topic ids, topic configs;
	// off without bootstrap_servers) and tierd's own read-only Kafka
	// protocol listener (package listener; off without listen).
	Kafka Kafka `yaml:"kafka"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `yaml:"log_level"`
	// MemoryLimitBytes is the Go soft memory limit tierd run sets, bytes,
	// when the GOMEMLIMIT environment variable is unset: 0 (default) means
	// the fetch caches' budgets + the copier's upload buffers + 64 MiB
	// (see Config.MemoryLimit); -1 sets none.
	MemoryLimitBytes int64 `yaml:"memory_limit_bytes"`
	// Metrics bounds the per-partition metric series.
	Metrics Metrics `yaml:"metrics"`
	// RSM is the endpoint the broker's RemoteStorageManager plugin calls
	// (package rsmapi; kafka-rsm/): the broker tiers its own segments
	// through tierd. Off by default.
	RSM rsmapi.Config `yaml:"rsm"`
	// ACLs authorizes the Kafka listener's clients with Kafka's ACLs
	// (package authz). Off by default.
	ACLs ACLs `yaml:"acls"`

	// meta is what loading the file learned; nil for a config built in
	// code.
	meta *meta
}

// meta is where a loaded config came from.
type meta struct {
	path string
	// warnings name old spellings the file used (see migrate).
	warnings []string
	// set holds the keys the file sets, by full key ("copier.log_dirs").
	set map[string]bool
	// renamed maps a key set under an old spelling to that spelling.
	renamed map[string]string
}

// Default returns the configuration of a file that sets nothing: each
// section's package defaults (copier.DefaultConfig, grpcapi.DefaultConfig,
// ...), bucket type filesystem, log level info and the HTTP endpoint on
// 127.0.0.1:7451. It does not pass Validate: copier.log_dirs, metadata.dir
// and the bucket's location have no default.
func Default() Config {
	return Config{
		Copier: copier.DefaultConfig(), Fetch: Fetch{Config: grpcapi.DefaultConfig()}, LogLevel: "info", Metadata: rlmm.DefaultConfig(),
		Kafka:  Kafka{Cluster: cluster.DefaultConfig(), Listener: listener.DefaultConfig()},
		Bucket: Bucket{Type: "filesystem", MinIO: minio.DefaultConfig(), S3: s3.DefaultConfig()}, Objects: Objects{Config: chunked.DefaultConfig()},
		HTTP: HTTP{Listen: "127.0.0.1:7451"}, Metrics: Metrics{PartitionLabelsMax: partlabels.DefaultMax},
		RSM: rsmapi.DefaultConfig(), ACLs: ACLs{Config: authz.DefaultConfig()},
	}
}

// Load reads a YAML file strictly: unknown keys (with the nearest known
// one suggested), keys set twice, values of the wrong kind, fractional numbers (outside
// the few settings that are fractions, see fractional: truncating a
// whole-number setting would silently change its meaning) and extra
// documents are errors, all reported at once, after the file's path, and
// so is a config that fails Validate. Old spellings are converted, with
// warnings (see Config.Warnings). The returned config remembers the
// file's absolute path (Config.Path), which copier.Config.Source is set
// to as well. On an error the returned config is not to be used.
func Load(path string) (Config, error) {
	cfg := Default()
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
		return cfg, fmt.Errorf("%s: %w", path, unquoted(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("%s: more than one YAML document; tierd reads one", path)
	}
	renamed := map[string]string{}
	warnings, errs := migrate(&root, renamed)
	if len(errs) == 0 && len(root.Content) == 1 {
		if err := noFloats(root.Content[0], reflect.TypeFor[Config](), ""); err != nil {
			return cfg, fmt.Errorf("%s: %w", path, err)
		}
	}
	if len(root.Content) == 1 {
		errs = append(errs, checkKeys(root.Content[0], reflect.TypeFor[Config](), "")...)
	}
	if len(errs) > 0 {
		return cfg, fmt.Errorf("%s: %w", path, errors.Join(errs...))
	}
	// Decoded strictly once more from the converted file: a safety net
	// for anything checkKeys let through.
	converted, err := yaml.Marshal(&root)
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", path, unquoted(err))
	}
	strict := yaml.NewDecoder(bytes.NewReader(converted))
	strict.KnownFields(true)
	if err := strict.Decode(&cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, unquoted(fileLines(err, &root, converted)))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	cfg.meta = &meta{path: abs, warnings: warnings, set: map[string]bool{}, renamed: renamed}
	fileKeys(&root, "", cfg.meta.set)
	cfg.Copier.Source = abs
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Path is the absolute path of the file c was loaded from; "" for a
// config built in code.
func (c Config) Path() string {
	if c.meta == nil {
		return ""
	}
	return c.meta.path
}

// Warnings returns the file's warnings, one per old spelling it used,
// each starting "line N: "; none for a config built in code.
func (c Config) Warnings() []string {
	if c.meta == nil {
		return nil
	}
	return c.meta.warnings
}

// Source says where a setting's value came from, by full key
// ("copier.log_dirs"): "file", "file (as OLD, an old spelling)" for a
// key the file wrote under an old spelling, or "default". A map key
// ("copier.topics") is "file" when the file sets any entry of it.
func (c Config) Source(key string) string {
	if c.meta == nil {
		return "default"
	}
	if old, ok := c.meta.renamed[key]; ok {
		return "file (as " + old + ", an old spelling)"
	}
	if c.meta.set[key] {
		return "file"
	}
	for k := range c.meta.set { // a map entry, e.g. copier.topics.orders.*
		if strings.HasPrefix(k, key+".") {
			return "file"
		}
	}
	return "default"
}

// noFloats refuses a fractional number for a setting of type t (path is
// its key): truncating a whole-number setting would silently change its
// meaning. A string setting takes any scalar as the text written, as a
// Kafka properties file would: password: 1.5 is the password "1.5".
// Values are not checked under the fractional settings, and are never
// shown for a secret.
func noFloats(n *yaml.Node, t reflect.Type, path string) error {
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Kind() == reflect.String || t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String) {
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!float" && !integral(n) { // too large a whole number: checkValue says so
		return fmt.Errorf("line %d: %s: %s: settings are whole numbers", n.Line, orTop(path), shownFor(path, n))
	}
	known := map[string]reflect.Type{}
	if t != nil && t.Kind() == reflect.Struct {
		for _, f := range fields(t) {
			known[f.key] = f.typ
		}
	}
	for i, c := range n.Content {
		var ct reflect.Type // nil: an unknown key (checkKeys names it) or a list's entry
		key := path
		switch {
		case n.Kind == yaml.MappingNode && i%2 == 0:
			continue // a key
		case n.Kind == yaml.MappingNode:
			k := n.Content[i-1].Value
			if fractional[k] {
				continue
			}
			key = join(path, k)
			if t != nil && t.Kind() == reflect.Map {
				ct = t.Elem()
			} else {
				ct = known[k]
			}
		case t != nil && t.Kind() == reflect.Slice:
			ct = t.Elem()
		}
		if err := noFloats(c, ct, key); err != nil {
			return err
		}
	}
	return nil
}

// lineRef is how yaml's decoder names a line: "line 7: ...", "already
// defined at line 4".
var lineRef = regexp.MustCompile(`\bline (\d+)`)

// fileLines is a decode error of converted (root marshalled) with its
// line numbers turned back into root's, the file's: the converted text
// has lost the file's comments and blank lines, and has its own layout.
// A line the file does not have (a node the conversion added) is named
// as such. The error unwraps to err.
func fileLines(err error, root *yaml.Node, converted []byte) error {
	var again yaml.Node
	if yaml.Unmarshal(converted, &again) != nil {
		return err
	}
	lines := map[int]int{}
	var pair func(a, b *yaml.Node)
	pair = func(file, conv *yaml.Node) {
		if file.Line > 0 {
			if _, ok := lines[conv.Line]; !ok {
				lines[conv.Line] = file.Line
			}
		}
		for i := 0; i < min(len(file.Content), len(conv.Content)); i++ {
			pair(file.Content[i], conv.Content[i])
		}
	}
	pair(root, &again)
	msg := lineRef.ReplaceAllStringFunc(err.Error(), func(ref string) string {
		n, _ := strconv.Atoi(lineRef.FindStringSubmatch(ref)[1])
		if l, ok := lines[n]; ok {
			return "line " + strconv.Itoa(l)
		}
		return "a line the file does not have"
	})
	return redacted{msg, err}
}

// quotedValue is how yaml's parser quotes a value in its messages: a
// value it cannot resolve to an explicit tag (password: !!int hunter2).
var quotedValue = regexp.MustCompile("`[^`]*`")

// unquoted is a parse error whose text has every value it quotes
// removed: the parser does not say which key a value belongs to, and it
// may be a secret's. It unwraps to err.
func unquoted(err error) error {
	msg := err.Error()
	if !quotedValue.MatchString(msg) {
		return err
	}
	return redacted{quotedValue.ReplaceAllString(msg, "a value (not shown)"), err}
}

// redacted is an error shown as msg that unwraps to err.
type redacted struct {
	msg string
	err error
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.err }

// fractional names the settings that are fractions, as Kafka's are:
// min.cleanable.dirty.ratio (copier.remote_compaction).
var fractional = map[string]bool{"min.cleanable.dirty.ratio": true}

// Validate reports every problem of c at once, joined, each naming its
// section and key: each section's own Validate, and the rules between
// sections (broker_id with kafka.bootstrap_servers, the Kafka listeners'
// protocols against sasl and tls, the RSM endpoint's addresses and log
// dirs). It reads no file.
func (c Config) Validate() error {
	errs := []error{c.Copier.Validate(), c.Fetch.Validate(), (rsm.Config{Prefix: c.Bucket.Prefix}).Validate(), c.Objects.Validate()}
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
	if c.Kafka.Listener.GroupCoordinator == listener.GroupsCluster && !c.Kafka.Cluster.Enabled() {
		errs = append(errs, errors.New("kafka: group.coordinator cluster needs bootstrap_servers: the groups are relayed to the cluster's coordinators"))
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
		if err := grpcapi.CheckListen(c.HTTP.Listen); err != nil {
			errs = append(errs, fmt.Errorf("http: %w", err))
		}
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.TLS.Validate(), c.RSM.Validate(), c.Fetch.Auth.Validate())
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
	if Mode(c.TLS.RSM) != TLSOff && !c.RSM.Enabled {
		errs = append(errs, errors.New("tls: rsm is on but rsm.enabled is false"))
	}
	return errors.Join(errs...)
}

// RSMStagingDir is rsm.staging_dir, or its default, rsm-staging under
// metadata.dir.
func (c Config) RSMStagingDir() string {
	if c.RSM.StagingDir != "" {
		return c.RSM.StagingDir
	}
	return filepath.Join(c.Metadata.Dir, "rsm-staging")
}

// ParseLevel reads log_level (debug, info, warn or error, in any case);
// the error names the key and the values it takes.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return l, fmt.Errorf("log_level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// MemoryLimit is the Go soft memory limit for c, bytes (0: none): the
// configured memory_limit_bytes, or the fetch caches' budgets + the
// copier's multipart upload buffers
// (remote.log.manager.copier.thread.pool.size x part_size x
// part_concurrency) + the RSM endpoint's when it is on
// (rsm.max_concurrent_copies x the same) + 64 MiB for the rest. Without
// it the garbage collector lets the heap grow to twice what is live, so a
// full cache would double the footprint.
func (c Config) MemoryLimit() int64 {
	switch {
	case c.MemoryLimitBytes > 0:
		return c.MemoryLimitBytes
	case c.MemoryLimitBytes < 0:
		return 0
	}
	var upload int64
	switch c.Bucket.Type {
	case "s3":
		upload = saturate.Mul(c.Bucket.S3.PartSize, int64(c.Bucket.S3.PartConcurrency))
	case "minio":
		upload = saturate.Mul(int64(min(c.Bucket.MinIO.PartSize, math.MaxInt64)), int64(c.Bucket.MinIO.PartConcurrency))
	}
	copies := int64(c.Copier.CopierThreadPoolSize)
	if c.RSM.Enabled {
		copies += int64(c.RSM.MaxConcurrentCopies)
	}
	return saturate.Add(saturate.Add(c.Fetch.MemoryBytes(), saturate.Mul(copies, upload)), 64<<20)
}
