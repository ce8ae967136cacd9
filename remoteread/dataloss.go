package remoteread

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tierd/tierd/internal/remotelog"
)

// maxLossKeys bounds the set of data-loss answers already logged.
const maxLossKeys = 10000

// lossLog remembers which data-loss answers were logged, so that a reader
// retrying one offset does not flood the log.
type lossLog struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first reports whether key is logged for the first time; past
// maxLossKeys keys the set starts over.
func (l *lossLog) first(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil || len(l.seen) >= maxLossKeys {
		l.seen = map[string]bool{}
	}
	if l.seen[key] {
		return false
	}
	l.seen[key] = true
	return true
}

// noteMissing handles a read of tp whose error err answers data loss
// (ErrDataLoss once classified): it logs it at error level with the
// partition and what was read (at: "offset", 42, or "timestamp", ms),
// once per partition and read, and tells the missing-copy hook of a
// finished copy with an object missing. Other errors are ignored.
func (s *Engine) noteMissing(err error, tp remotelog.TopicPartition, at ...any) {
	if err == nil || !errors.Is(classify(err), ErrDataLoss) {
		return
	}
	var mc *missingCopyError
	copyMissing := errors.As(err, &mc)
	if s.losses.first(fmt.Sprint(tp, at)) {
		args := append([]any{"partition", tp}, at...)
		if copyMissing {
			args = append(args, "segment", mc.meta.ID, "base_offset", mc.meta.StartOffset, "end_offset", mc.meta.EndOffset)
		}
		s.log.Error("read answered DATA_LOSS: tiered data that must exist is missing or corrupt (logged once per partition and read)",
			append(args, "err", err)...)
	}
	if copyMissing && s.onMissing != nil {
		s.onMissing(mc.meta)
	}
}
