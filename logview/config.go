package logview

import (
	"errors"
	"fmt"
	"time"
)

// Config says where the local tier is.
type Config struct {
	// LogDirs are the Kafka log dirs (parents of "<topic>-<partition>"
	// directories). No default; empty serves the remote tier only.
	LogDirs []string
	// BrokerOwned: a broker writes the log dirs, so local data is served
	// only below the high watermark in each log dir's
	// replication-offset-checkpoint. Default false: the end of the last
	// whole batch bounds reads.
	BrokerOwned bool
	// RescanInterval bounds how often the log dirs are listed for new or
	// moved partition directories. Default 5s.
	RescanInterval time.Duration
	// CacheTTL is how long the topic list and leader-epoch lineages are
	// reused. Default 1s.
	CacheTTL time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config { return Config{RescanInterval: 5 * time.Second, CacheTTL: time.Second} }

// Validate reports every bad setting.
func (c Config) Validate() error {
	var errs []error
	if c.RescanInterval <= 0 {
		errs = append(errs, fmt.Errorf("logview: rescan interval %v must be > 0", c.RescanInterval))
	}
	if c.CacheTTL < 0 {
		errs = append(errs, fmt.Errorf("logview: cache ttl %v must be >= 0", c.CacheTTL))
	}
	for _, d := range c.LogDirs {
		if d == "" {
			errs = append(errs, errors.New("logview: empty log dir"))
		}
	}
	return errors.Join(errs...)
}
