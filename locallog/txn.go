package locallog

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// txnState is what one segment's batches say about one producer's
// transactions (KIP-98): a transactional data batch opens a transaction
// when none is open, a control batch (commit or abort marker) closes it.
// Kept per segment so each segment is scanned once, it is the effect of
// the segment on the state it starts with.
type txnState struct {
	// closed is set once a control batch of the producer was seen: the
	// state at the segment's start no longer matters.
	closed bool
	// firstData is the base offset of the first transactional data batch
	// after the last control batch (after the segment's start when there
	// is none), or -1.
	firstData int64
}

func (c *cursor) trackTxn(b batch.Batch) {
	if c.txns == nil {
		c.txns = map[int64]*txnState{}
	}
	t := c.txns[b.ProducerID]
	if t == nil {
		t = &txnState{firstData: -1}
		c.txns[b.ProducerID] = t
	}
	switch {
	case b.Control:
		t.closed, t.firstData = true, -1
	case t.firstData < 0:
		t.firstData = b.BaseOffset
	}
}

// foldTxns applies the segment's effect to open (producer id -> first
// offset of its open transaction).
func (s *segment) foldTxns(open map[int64]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, t := range s.cur.txns {
		_, wasOpen := open[pid]
		switch {
		case t.closed && t.firstData < 0:
			delete(open, pid)
		case t.closed || (!wasOpen && t.firstData >= 0):
			open[pid] = t.firstData
		}
	}
}

// lastStable scans every segment below hw (once; later calls only the
// appended part) and returns the first offset of the oldest transaction
// still open below hw, or hw. Transactions opened before the oldest
// segment are not seen.
func (l *listing) lastStable(hw int64) (int64, error) {
	var open map[int64]int64
	for i, s := range l.segs {
		if s.base >= hw {
			break
		}
		// The active segment was advanced to hw by highWatermark just now.
		if i < len(l.segs)-1 {
			if _, err := s.advance(hw, false); err != nil {
				return 0, err
			}
		}
		if s.hasTxns() {
			if open == nil {
				open = map[int64]int64{}
			}
			s.foldTxns(open)
		}
	}
	lso := hw
	for _, first := range open {
		lso = min(lso, first)
	}
	return lso, nil
}

func (s *segment) hasTxns() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cur.txns) > 0
}

// txnFile caches a segment's parsed .txnindex.
type txnFile struct {
	loaded  bool
	final   bool // read after the segment was rolled: it no longer changes
	size    int64
	entries []index.AbortedTxn
}

// AbortedTxns returns the aborted transactions, from the segments'
// .txnindex files, whose range overlaps [from, to): entries with
// LastOffset >= from and FirstOffset < to, ordered by FirstOffset. As Kafka
// does (LocalLog.collectAbortedTransactions), it reads the index of the
// segment holding from and of the following segments (an abort marker, and
// so its entry, can sit in a later segment than the transaction's data)
// until an entry's LastStableOffset reaches to. A missing .txnindex has no
// entries; one whose length is not a multiple of 34 bytes (being appended
// to) gives its whole entries. Errors: ErrSegmentGone (wrapped) when a
// segment was deleted between listing and reading its index;
// kafkalog.ErrCorrupt naming the file for an entry of unknown version;
// ErrClosed; I/O.
func (p *Partition) AbortedTxns(from, to int64) ([]index.AbortedTxn, error) {
	if from >= to {
		return nil, nil
	}
	var err error
	for attempt := 0; attempt < readAttempts; attempt++ {
		var l *listing
		if l, err = p.acquire(attempt > 0); err != nil {
			return nil, err
		}
		var out []index.AbortedTxn
		out, err = l.abortedTxns(from, to)
		l.release()
		if !errors.Is(err, errVanished) {
			return out, err
		}
	}
	return nil, fmt.Errorf("%w: %w", ErrSegmentGone, err)
}

func (l *listing) abortedTxns(from, to int64) ([]index.AbortedTxn, error) {
	var out []index.AbortedTxn
	for i := l.find(from); i < len(l.segs); i++ {
		entries, err := l.segs[i].txnEntries(i == len(l.segs)-1)
		if err != nil {
			return nil, err
		}
		complete := false
		for _, e := range entries {
			if e.LastOffset >= from && e.FirstOffset < to {
				out = append(out, e)
			}
			complete = complete || e.LastStableOffset >= to
		}
		if complete {
			break
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	return out, nil
}

// txnEntries returns the segment's .txnindex entries: read once for a
// rolled segment, again whenever its size changed for the active one.
func (s *segment) txnEntries(active bool) ([]index.AbortedTxn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.txnCache
	if t.final {
		return t.entries, nil
	}
	path := segPath(s.dir, s.base, kafkalog.TxnIndexSuffix)
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// Absent: no aborted transaction, unless the whole segment is gone.
		if _, lerr := os.Stat(s.path); errors.Is(lerr, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", errVanished, path)
		}
		*t = txnFile{loaded: true, final: !active}
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("locallog: stat %s: %w", path, err)
	}
	if t.loaded && st.Size() == t.size && active {
		return t.entries, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", errVanished, path)
	}
	if err != nil {
		return nil, fmt.Errorf("locallog: read %s: %w", path, err)
	}
	whole := data[:len(data)/index.TxnEntrySize*index.TxnEntrySize]
	entries, err := index.ParseTxnIndex(whole)
	if err != nil {
		return nil, kafkalog.WithFile(err, path)
	}
	*t = txnFile{loaded: true, final: !active, size: int64(len(data)), entries: entries}
	return entries, nil
}
