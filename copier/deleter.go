package copier

import "github.com/tierd/tierd/copier/deleter"

// deleteBatch is the most copies one group of the delete protocol moves
// (deleter.Batch).
const deleteBatch = deleter.Batch

// deletes returns the remote-delete protocol over the copier's store and
// bucket as they are now, with its copy check (auditor.checkCopy), metrics and
// sweep requests (needSweep).
func (c *Copier) deletes() *deleter.Deleter {
	return &deleter.Deleter{Store: c.store, Bucket: c.rs, Log: c.log, CheckCopy: c.audit.checkCopy, Counted: c.rep.countDelete,
		Deleted: func(n int) { c.m.remoteDeleted.Add(float64(n)) }, NeedSweep: c.needSweep}
}
