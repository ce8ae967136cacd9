package copier

import (
	"path/filepath"

	"github.com/tierd/tierd/internal/kafkalog"
)

// Startup notes: what a pass finds in the log dirs that makes tierd copy
// nothing there without an error, said once so an idle tierd is never
// silent about why.

// logDir returns the log dir holding the partition directory.
func (p *partition) logDir() string { return filepath.Dir(p.dir) }

// warnEmptyLogDir warns, once per log dir, that it holds no
// "<topic>-<partition>" directory (found counts them): nothing there is
// tiered, and a log_dirs entry pointing one level too high or at the
// wrong disk looks exactly like this.
func (c *Copier) warnEmptyLogDir(dir string, found int) {
	if found > 0 {
		c.unwarn("emptylogdir " + dir)
		return
	}
	if c.once("emptylogdir " + dir) {
		c.log.Warn("log dir holds no <topic>-<partition> directories: nothing to tier there; check that copier.log_dirs names the broker's log.dirs",
			"dir", dir)
	}
}

// warnNotInCheckpoint warns, once per partition, that the log dir's
// replication-offset-checkpoint has no entry for it: none of its offsets
// counts as committed, so nothing of it is copied until the broker
// checkpoints it (a new partition, or a directory the broker does not
// host).
func (c *Copier) warnNotInCheckpoint(p *partition) {
	key := "notincheckpoint " + p.tp.String()
	if p.inCheckpoint {
		c.unwarn(key)
		return
	}
	if c.once(key) {
		c.log.Warn("partition is not in the log dir's replication-offset-checkpoint: none of its offsets counts as committed, so nothing of it is copied until the broker checkpoints it",
			"partition", p.tp, "checkpoint", filepath.Join(p.logDir(), kafkalog.ReplicationOffsetCheckpointFile))
	}
}
