package copier

import (
	"time"

	"github.com/tierd/tierd/internal/remotelog"
)

// logProgress logs, every progressEvery while a copy runs, how much of
// its .log was read for upload and at what rate, until stop is called.
// A copy shorter than progressEvery logs nothing.
func (r *reporter) logProgress(tp remotelog.TopicPartition, s localSegment, in *inflightCopy) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		t := time.NewTicker(r.progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sent, elapsed := in.sent.Load(), time.Since(start)
				r.log.Info("copy in progress", "partition", tp, "base_offset", s.base, "end_offset", s.end, "sent_bytes", sent,
					"bytes", in.prog.Bytes, "bytes_per_second", int64(float64(sent)/elapsed.Seconds()), "elapsed", elapsed.Round(time.Millisecond))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
