package authz

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Config configures an Authorizer. The yaml names follow Kafka's broker
// settings where one exists (super.users,
// allow.everyone.if.no.acl.found).
type Config struct {
	// RefreshInterval is how often the ACLs are read again from their
	// source (the Kafka cluster, or the ACL file), so that a grant or a
	// revoke in the cluster is applied within it; a read not done within
	// it is given up, as failed. Default 30s; at least 1s.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// MaxStale is how long the last ACLs read keep deciding while every
	// read since fails (the cluster unreachable, the file unreadable or
	// invalid): past it, every request is denied but a super user's, until
	// a read succeeds. 0 keeps the last ACLs for as long as reads fail.
	// Default 5m.
	MaxStale time.Duration `yaml:"max_stale"`
	// SuperUsers are principals allowed everything, as Kafka's
	// super.users names them ("User:admin"). Default none.
	SuperUsers []string `yaml:"super.users"`
	// AllowEveryoneIfNoACLFound allows a request on a resource that no
	// ACL matches (Kafka's allow.everyone.if.no.acl.found). Default false.
	AllowEveryoneIfNoACLFound bool `yaml:"allow.everyone.if.no.acl.found"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{RefreshInterval: 30 * time.Second, MaxStale: 5 * time.Minute}
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if c.RefreshInterval < time.Second {
		errs = append(errs, fmt.Errorf("authz: refresh_interval %v is below 1s", c.RefreshInterval))
	}
	if c.MaxStale < 0 {
		errs = append(errs, fmt.Errorf("authz: max_stale %v is negative (0 keeps the last ACLs while reads fail)", c.MaxStale))
	} else if c.MaxStale > 0 && c.MaxStale < c.RefreshInterval {
		errs = append(errs, fmt.Errorf("authz: max_stale %v is shorter than refresh_interval %v: the ACLs would go stale between two reads", c.MaxStale, c.RefreshInterval))
	}
	for _, p := range c.SuperUsers {
		if i := strings.IndexByte(p, ':'); i <= 0 || i == len(p)-1 {
			errs = append(errs, fmt.Errorf("authz: super user %q is not a principal <type>:<name> (e.g. User:admin)", p))
		}
	}
	return errors.Join(errs...)
}
