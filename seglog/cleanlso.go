package seglog

import (
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// openTxnScan finds, from the log itself, the transactions that have data
// but no marker yet, so that the cleaner's last stable offset also covers
// a transaction left open when the log was last closed (the in-memory
// producer state starts empty at Open, while Kafka rebuilds it from the
// log). It reads batch headers once from the log start, then only what
// was appended since; Clean calls it under the read lock with cleanMu
// held.
type openTxnScan struct {
	next int64           // offsets below next have been scanned
	open map[int64]int64 // producer id -> first offset of its open transaction
}

// firstOpen scans the segments past the last scan and returns the first
// offset of the earliest open transaction, or -1 when none is open.
// Errors are corruption errors naming the segment file.
func (t *openTxnScan) firstOpen(segs []*segment) (int64, error) {
	if t.open == nil {
		t.open = map[int64]int64{}
	}
	for _, s := range segs {
		if s.nextOffset <= t.next {
			continue
		}
		var pos int64
		if e, ok := index.LookupOffset(s.idx.Offsets, t.next); ok {
			pos = int64(e.Position)
		}
		sc := batch.NewScanner(s.log, s.size, batch.ScanOptions{Start: pos})
		for sc.Next() {
			b := sc.Batch()
			if b.LastOffset < t.next || b.Legacy() || !b.Transactional {
				continue
			}
			if b.Control {
				delete(t.open, b.ProducerID)
			} else if _, ok := t.open[b.ProducerID]; !ok {
				t.open[b.ProducerID] = b.BaseOffset
			}
		}
		if err := sc.Err(); err != nil {
			return 0, kafkalog.WithFile(err, s.path(kafkalog.LogSuffix))
		}
		t.next = max(t.next, s.nextOffset)
	}
	first := int64(-1)
	for _, off := range t.open {
		if first < 0 || off < first {
			first = off
		}
	}
	return first, nil
}
