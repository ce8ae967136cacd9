package copier

import (
	"errors"
	"fmt"

	"github.com/tierd/tierd/internal/remotelog"
)

// GateError is a gate's verdict that passes must wait (see WithGate):
// Reason is what every partition's status says meanwhile
// (remotelog.WaitStoreUnreachable when the object store does not answer,
// remotelog.WaitMetadataUnwritable when the metadata dir takes no
// writes), Err the cause, shown in the status detail.
type GateError struct {
	Reason remotelog.WaitReason
	Err    error
}

func (e *GateError) Error() string { return e.Err.Error() }

func (e *GateError) Unwrap() error { return e.Err }

// WithGate sets a check made before every pass: while fn returns an
// error (the metadata store takes no writes, the bucket does not answer),
// the pass does nothing and Sync returns that error, counted as a failed
// pass; Run logs it once and retries every Interval. Every partition
// known (from the last pass, or found in the log dirs) then shows as
// waiting, keeping its last pending segments and bytes, for the reason
// the error carries as a *GateError (an error without one reads
// store_unreachable when it says a server did not answer, else
// copy_failed). While fn says the object store is down, a copy failing
// during a pass reads store_unreachable too. fn is called from several
// goroutines. Without a gate every pass runs.
func WithGate(fn func() error) Option { return func(c *Copier) { c.gate = fn } }

// gateErr returns why the pass must wait, nil when it may run; a pass
// that waits marks every known partition waiting for that reason (it
// scans the log dirs: the caller holds c.mu).
func (c *Copier) gateErr() error {
	if c.gate == nil {
		return nil
	}
	err := c.gate()
	if err == nil {
		return nil
	}
	c.m.passes.Inc()
	c.m.passErrors.Inc()
	parts, _ := c.scan()
	c.rep.gated(parts, gateReason(err), err)
	return fmt.Errorf("copier: pass skipped: %w", err)
}

// gateReason is the wait reason a gate's error gives.
func gateReason(err error) remotelog.WaitReason {
	var ge *GateError
	switch {
	case errors.As(err, &ge):
		return ge.Reason
	case unreachable(err):
		return remotelog.WaitStoreUnreachable
	}
	return remotelog.WaitCopyFailed
}

// environment returns the gate's verdict now: the reason and the error,
// "" and nil when passes may run.
func (c *Copier) environment() (remotelog.WaitReason, error) {
	if c.gate == nil {
		return "", nil
	}
	if err := c.gate(); err != nil {
		return gateReason(err), err
	}
	return "", nil
}

// gateDetail says in a sentence why no pass runs.
func gateDetail(reason remotelog.WaitReason, err error) string {
	switch reason {
	case remotelog.WaitStoreUnreachable:
		return fmt.Sprintf("the object store does not answer tierd's probe (%v): no pass runs, copies and deletions wait until it answers; pending counts are from the last pass", err)
	case remotelog.WaitMetadataUnwritable:
		return fmt.Sprintf("the metadata dir takes no writes (%v): no pass runs until it does (tierd retries by itself); pending counts are from the last pass", err)
	}
	return fmt.Sprintf("no pass runs: %v; pending counts are from the last pass", err)
}
