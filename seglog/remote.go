package seglog

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
)

// RemoteReader reads the tiered part of this partition's log; tierd's fetch
// client (fetch.PartitionReader) satisfies it. seglog does not import it:
// the caller passes one in with WithRemote.
type RemoteReader interface {
	// ReadRemote returns whole batches from offset, as Read does.
	ReadRemote(ctx context.Context, offset int64, maxBytes int) ([]byte, error)
	// RemoteLogStartOffset returns the log start offset of the whole log.
	RemoteLogStartOffset(ctx context.Context) (int64, error)
	// RemoteOffsetForTimestamp is OffsetForTimestamp over the tiered part.
	RemoteOffsetForTimestamp(ctx context.Context, ts int64) (offset, timestamp int64, found bool, err error)
}

// WithRemote makes reads below the local log start offset go to r, so a
// reader sees one continuous log across the local and remote tiers.
func WithRemote(r RemoteReader) Option { return func(l *Log) { l.remote = r } }

// refreshEvery bounds how often a read checks whether tiering removed
// local segments.
const refreshEvery = 100 * time.Millisecond

// maybeRefresh drops the oldest segments whose files were deleted or
// renamed to ".deleted" by someone else (tierd's local retention), at most
// once per refreshEvery and only when the directory changed. Their open
// files stay valid for reads already running.
func (l *Log) maybeRefresh() {
	now := time.Now().UnixNano()
	last := atomic.LoadInt64(&l.lastRefresh)
	if now-last < int64(refreshEvery) || !atomic.CompareAndSwapInt64(&l.lastRefresh, last, now) {
		return
	}
	st, err := os.Stat(l.dir)
	if err != nil || st.ModTime().UnixNano() == atomic.LoadInt64(&l.dirMtime) {
		return
	}
	atomic.StoreInt64(&l.dirMtime, st.ModTime().UnixNano())
	l.Refresh()
}

// Refresh drops, from the oldest end, segments whose .log file is gone
// from the directory (deleted or renamed to ".deleted" by tiering). The
// active segment is never dropped.
func (l *Log) Refresh() {
	l.mu.RLock()
	gone := len(l.segs) > 1 && l.segs[0].gone()
	l.mu.RUnlock()
	if !gone {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.segs) > 1 {
		if !l.segs[0].gone() {
			return
		}
		// Readers hold no file handle past the read lock, so closing here
		// cannot break one.
		l.segs[0].close()
		l.segs = l.segs[1:]
	}
}

// LocalLogStartOffset returns the base offset of the oldest local segment,
// after dropping segments that tiering removed from the directory.
func (l *Log) LocalLogStartOffset() int64 {
	l.Refresh()
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segs[0].base
}

// LogStartOffsetContext returns the first offset of the whole log: the
// remote log start offset when a remote reader is set, else the local one.
func (l *Log) LogStartOffsetContext(ctx context.Context) (int64, error) {
	local := l.LocalLogStartOffset()
	if l.remote == nil {
		return local, nil
	}
	off, err := l.remote.RemoteLogStartOffset(ctx)
	if err != nil {
		return 0, err
	}
	return min(off, local), nil
}

// gone reports whether the segment's .log left the directory.
func (s *segment) gone() bool {
	_, err := os.Stat(s.path(kafkalog.LogSuffix))
	return errors.Is(err, os.ErrNotExist)
}
