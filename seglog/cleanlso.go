package seglog

import (
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// openTxnScan finds, from the log itself, the transactions that have data
// but no marker yet, so that the cleaner's last stable offset also covers
// a transaction left open when the log was last closed (the in-memory
// producer state starts empty at Open, while Kafka rebuilds it from the
// log). It reads the whole log once after Open, then only what was
// appended since, without holding the log's lock (appends go on). Only
// Clean uses it, with cleanMu held, so no swap runs meanwhile.
type openTxnScan struct {
	next int64           // offsets below next have been scanned
	open map[int64]int64 // producer id -> first offset of its open transaction
	seg  *segment        // the segment the last scan stopped in
	pos  int64           // and the byte position it stopped at
}

// scanOpenTxns brings the scan up to the log's current end and returns the
// first offset of the earliest open transaction it found, or -1 when none
// is open. A transaction opened after the scan is known to the in-memory
// producer state, so the caller takes the lower of both. Errors are
// ErrClosed and corruption or I/O errors naming the segment file.
func (l *Log) scanOpenTxns() (int64, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, ErrClosed
	}
	segs := append([]*segment(nil), l.segs...)
	sizes, nexts := make([]int64, len(segs)), make([]int64, len(segs))
	for i, s := range segs {
		sizes[i], nexts[i] = s.size, s.nextOffset
	}
	l.mu.RUnlock()

	t := &l.txnScan
	if t.open == nil {
		t.open = map[int64]int64{}
	}
	for i, s := range segs {
		if nexts[i] <= t.next && i < len(segs)-1 {
			continue
		}
		var start int64
		if s == t.seg {
			start = t.pos
		}
		sc := batch.NewScanner(s.log, sizes[i], batch.ScanOptions{Start: start})
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
			t.next = b.LastOffset + 1
		}
		if err := sc.Err(); err != nil {
			return 0, l.abandonedBy(segs[:len(segs)-1], kafkalog.WithFile(err, s.path(kafkalog.LogSuffix)))
		}
		t.seg, t.pos = s, sizes[i]
		if i < len(segs)-1 {
			t.next = max(t.next, nexts[i])
		}
	}
	first := int64(-1)
	for _, off := range t.open {
		if first < 0 || off < first {
			first = off
		}
	}
	return first, nil
}
