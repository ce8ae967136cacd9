package grpcapi

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/tierd/tierd/remoteread"
)

// Config configures the server: the gRPC address and, inline, the read
// engine's settings (remoteread.Config). Defaults are in DefaultConfig.
type Config struct {
	// Listen is the gRPC address. Default "127.0.0.1:7450".
	Listen            string `yaml:"listen"`
	remoteread.Config `yaml:",inline"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Listen: "127.0.0.1:7450", Config: remoteread.DefaultConfig()}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if err := CheckListen(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("fetch: %w", err))
	}
	return errors.Join(append(errs, c.Config.Validate())...)
}

// WithDynamic returns c with next's dynamic settings (the engine's, see
// remoteread.DynamicKeys; the listen address is static).
func (c Config) WithDynamic(next Config) Config {
	c.Config = c.Config.WithDynamic(next.Config)
	return c
}

// DiskBudgetDynamic is remoteread.Config.DiskBudgetDynamic.
func (c Config) DiskBudgetDynamic(next Config) bool { return c.Config.DiskBudgetDynamic(next.Config) }

// CheckListen validates a listen address: host:port with a port in 0-65535.
func CheckListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen %q: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("listen %q: port must be a number from 0 to 65535", addr)
	}
	return nil
}
