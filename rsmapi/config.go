package rsmapi

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
)

// DefaultPrefix is rsm.prefix's default: the key prefix, under
// bucket.prefix, of every broker-owned copy.
const DefaultPrefix = "_kafka-rsm"

// reservedPrefixes are the names at the top of tierd's own key space
// that are not partitions: rsm.prefix may be none of them.
var reservedPrefixes = []string{"_instances", "_tierd_probe"}

// Config is the rsm: section of tierd.yaml: tierd's RSM endpoint, which
// the broker's RemoteStorageManager plugin calls (see the package doc).
type Config struct {
	// Enabled serves the endpoint. Default false.
	Enabled bool `yaml:"enabled"`
	// Listen is the endpoint's host:port. Default "127.0.0.1:7452"
	// (loopback: the plugin runs in the broker on the same host).
	Listen string `yaml:"listen"`
	// TokenFile holds the bearer token every request must carry: one
	// line, surrounding whitespace ignored, at least 16 characters and no
	// whitespace inside. The file may not be readable or writable by
	// other users (mode o-rwx: the token lets its holder copy and delete
	// a broker's tiered data). Read at start and again on SIGHUP (tierd
	// config reload); a reload that finds it unusable keeps the token in
	// use. Required when Enabled. Default "".
	TokenFile string `yaml:"token_file"`
	// LogDirs are the broker's log dirs (Kafka's log.dirs) as tierd sees
	// them: a copy by path reads only files inside one of them. Required
	// when Enabled; they may not overlap copier.log_dirs. Default none.
	LogDirs []string `yaml:"log_dirs"`
	// Prefix is the key prefix, under bucket.prefix, of the broker-owned
	// copies: one path element that cannot be a partition directory name
	// (<topic>-<partition>) nor one of tierd's own names (_instances,
	// _tierd_probe), so that nothing walking tierd's own copies meets
	// these. Default "_kafka-rsm".
	Prefix string `yaml:"prefix"`
	// CopyTimeout bounds one copy, from its request's arrival to its
	// answer; a copy past it ends, its objects deleted, with 504. Set
	// the plugin's tierd.copy.timeout.ms above it. Default 5m.
	CopyTimeout time.Duration `yaml:"copy_timeout"`
	// RequestTimeout bounds a read, an index read, a delete and the
	// health check. Default 30s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// MaxConcurrentCopies is how many copies run at once; one more is
	// answered 429 (the plugin retries it as retriable). The broker runs
	// at most remote.log.manager.copier.thread.pool.size (10) at once.
	// Default 16, from 1 to 1024.
	MaxConcurrentCopies int `yaml:"max_concurrent_copies"`
	// StagingDir holds the files of a copy by upload while it runs (the
	// whole segment: up to segment.bytes plus its indexes per copy in
	// flight). tierd removes only the entries it makes there
	// (rsm-upload-*), those left by a crash at start. Default "": the
	// directory rsm-staging in metadata.dir.
	StagingDir string `yaml:"staging_dir"`
	// IndexIntervalBytes is Kafka's index.interval.bytes, used when a
	// segment's offset and time indexes fail their checks and are
	// rebuilt from its log. Default 4096.
	IndexIntervalBytes int64 `yaml:"index.interval.bytes"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Listen: "127.0.0.1:7452", Prefix: DefaultPrefix, CopyTimeout: 5 * time.Minute, RequestTimeout: 30 * time.Second,
		MaxConcurrentCopies: 16, IndexIntervalBytes: 4096}
}

// MaxConcurrentCopiesLimit caps max_concurrent_copies.
const MaxConcurrentCopiesLimit = 1024

// Validate reports every problem at once; it reads no file. A disabled
// endpoint's settings are checked for their kind only.
func (c Config) Validate() error {
	var errs []error
	if err := CheckPrefix(c.Prefix); err != nil {
		errs = append(errs, err)
	}
	if c.CopyTimeout <= 0 || c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("rsm: copy_timeout %s and request_timeout %s must be positive", c.CopyTimeout, c.RequestTimeout))
	}
	if c.MaxConcurrentCopies < 1 || c.MaxConcurrentCopies > MaxConcurrentCopiesLimit {
		errs = append(errs, fmt.Errorf("rsm: max_concurrent_copies %d is out of range (from 1 to %d)", c.MaxConcurrentCopies, MaxConcurrentCopiesLimit))
	}
	if c.IndexIntervalBytes < 0 {
		errs = append(errs, fmt.Errorf("rsm: index.interval.bytes %d must not be negative", c.IndexIntervalBytes))
	}
	if c.StagingDir != "" && !filepath.IsAbs(c.StagingDir) {
		errs = append(errs, fmt.Errorf("rsm: staging_dir %q must be an absolute path", c.StagingDir))
	}
	for _, d := range c.LogDirs {
		if !filepath.IsAbs(d) {
			errs = append(errs, fmt.Errorf("rsm: log_dirs: %q must be an absolute path (the broker's log.dirs as tierd sees them)", d))
		}
	}
	if !c.Enabled {
		return errors.Join(errs...)
	}
	if err := checkListen(c.Listen); err != nil {
		errs = append(errs, err)
	}
	if c.TokenFile == "" {
		errs = append(errs, errors.New("rsm: token_file is required when enabled: every request must carry the token it holds"))
	}
	if len(c.LogDirs) == 0 {
		errs = append(errs, errors.New("rsm: log_dirs is required when enabled: the broker's log.dirs as tierd sees them"))
	}
	return errors.Join(errs...)
}

// CheckPrefix reports why p cannot be rsm.prefix: it must be one path
// element of Kafka's topic characters ([a-zA-Z0-9._-]), and neither a
// partition directory name nor one of tierd's own top-level names.
func CheckPrefix(p string) error {
	switch {
	case p == "":
		return errors.New("rsm: prefix is required (default " + DefaultPrefix + ")")
	case p == "." || p == "..":
		return fmt.Errorf("rsm: prefix %q is not a name", p)
	case strings.ContainsFunc(p, func(r rune) bool { return !topicChar(r) }):
		return fmt.Errorf("rsm: prefix %q: one path element of a-z, A-Z, 0-9, '.', '_' and '-' only", p)
	}
	if tp, ok := kafkalog.ParsePartitionDir(p); ok {
		return fmt.Errorf("rsm: prefix %q is a partition directory name (topic %s partition %d): tierd's own copies of that partition would share its keys",
			p, tp.Topic, tp.Partition)
	}
	for _, r := range reservedPrefixes {
		if strings.EqualFold(p, r) {
			return fmt.Errorf("rsm: prefix %q is one of tierd's own names", p)
		}
	}
	return nil
}

func topicChar(r rune) bool {
	return r == '.' || r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}

func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("rsm: listen %q: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("rsm: listen %q: port must be a number from 0 to 65535", addr)
	}
	return nil
}

// Overlap returns an error naming the first pair of directories of a
// and b where one lies inside (or is) the other, after cleaning; nil
// when none does. tierd run refuses rsm.log_dirs that overlap
// copier.log_dirs: a partition would be tiered both ways.
func Overlap(a, b []string) error {
	for _, x := range a {
		for _, y := range b {
			cx, cy := resolved(x), resolved(y)
			if within(cx, cy) || within(cy, cx) {
				return fmt.Errorf("rsm: log_dirs %s and copier: log_dirs %s overlap: a partition would be tiered by the broker and by tierd's copier", x, y)
			}
		}
	}
	return nil
}

// within reports whether p is dir or lies inside it (both clean).
func within(p, dir string) bool {
	if p == dir {
		return true
	}
	if dir == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(p, dir+string(filepath.Separator))
}

// resolved is dir cleaned, with its symbolic links resolved when it
// exists.
func resolved(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return filepath.Clean(dir)
}
