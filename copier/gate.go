package copier

import "fmt"

// WithGate sets a check made before every pass: while fn returns an
// error (the metadata store takes no writes, the bucket does not answer),
// the pass does nothing and Sync returns that error, counted as a failed
// pass; Run logs it once and retries every Interval. Without a gate every
// pass runs.
func WithGate(fn func() error) Option { return func(c *Copier) { c.gate = fn } }

// gateErr returns why the pass must wait, nil when it may run.
func (c *Copier) gateErr() error {
	if c.gate == nil {
		return nil
	}
	if err := c.gate(); err != nil {
		c.m.passes.Inc()
		c.m.passErrors.Inc()
		return fmt.Errorf("copier: pass skipped: %w", err)
	}
	return nil
}
