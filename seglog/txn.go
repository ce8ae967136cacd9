package seglog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// Transactions (KIP-98), as a partition leader writes them: data batches
// of a transactional producer carry the transactional attribute, its
// producer id and epoch and increasing sequence numbers; the transaction
// ends with a control batch holding one COMMIT or ABORT marker; an abort
// also appends an entry to the active segment's .txnindex (producer id,
// the transaction's first offset, the marker's offset, and the last
// stable offset once the transaction is over), which read_committed
// consumers are given to drop the aborted records.
//
// Producer state lives in memory only: a transaction open when the Log is
// closed cannot be ended after a reopen (ErrNoTransaction), and the
// .txnindex of an active segment cut by recovery is not cut with it.

// ErrNoTransaction is returned by EndTransaction for a producer with no
// open transaction in this Log.
var ErrNoTransaction = errors.New("seglog: no open transaction for the producer")

// producerState is one transactional producer's state.
type producerState struct {
	epoch    int16
	nextSeq  int32
	txnFirst int64 // first offset of the open transaction; -1 when none
	lastData int64 // last offset of the producer's last data batch; -1 when none
}

// AppendTransactional writes recs as one transactional batch of producer
// pid at epoch, opening a transaction if pid has none open, and returns
// the first record's offset. Errors as Append.
func (l *Log) AppendTransactional(pid int64, epoch int16, recs ...Record) (int64, error) {
	l.mu.Lock()
	ps := l.producer(pid, epoch)
	seq := ps.nextSeq
	l.mu.Unlock()
	off, err := l.appendWith(batch.CodecNone, func(p *batch.Params) {
		p.Transactional, p.ProducerID, p.ProducerEpoch, p.BaseSequence = true, pid, epoch, seq
	}, recs)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ps.nextSeq += int32(len(recs))
	ps.lastData = off + int64(len(recs)) - 1
	if ps.txnFirst < 0 {
		ps.txnFirst = off
	}
	return off, nil
}

// producer returns pid's state, created at epoch when new. l.mu is held.
func (l *Log) producer(pid int64, epoch int16) *producerState {
	if l.producers == nil {
		l.producers = map[int64]*producerState{}
	}
	ps, ok := l.producers[pid]
	if !ok || ps.epoch != epoch {
		ps = &producerState{epoch: epoch, txnFirst: -1, lastData: -1}
		if ok {
			ps.txnFirst, ps.lastData = l.producers[pid].txnFirst, l.producers[pid].lastData
		}
		l.producers[pid] = ps
	}
	return ps
}

// Control record types (ControlRecordType).
const (
	controlAbort  = 0
	controlCommit = 1
)

// EndTransaction writes the COMMIT (commit true) or ABORT marker of pid's
// open transaction as a control batch and returns its offset; an abort is
// recorded in the active segment's .txnindex. Errors: ErrNoTransaction,
// then as Append.
func (l *Log) EndTransaction(pid int64, epoch int16, commit bool) (int64, error) {
	l.mu.Lock()
	ps, ok := l.producers[pid]
	if !ok || ps.txnFirst < 0 {
		l.mu.Unlock()
		return 0, fmt.Errorf("%w: producer %d", ErrNoTransaction, pid)
	}
	l.mu.Unlock()
	kind := int16(controlAbort)
	if commit {
		kind = controlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(kind))
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 0) // version 0, coordinator epoch 0
	off, err := l.appendWith(batch.CodecNone, func(p *batch.Params) {
		p.Transactional, p.Control, p.ProducerID, p.ProducerEpoch, p.BaseSequence = true, true, pid, epoch, -1
	}, []Record{{Key: key, Value: value}})
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	first := ps.txnFirst
	ps.txnFirst = -1
	if commit {
		return off, nil
	}
	lso := off + 1 // the last stable offset once this transaction is over
	for _, o := range l.producers {
		if o.txnFirst >= 0 && o.txnFirst < lso {
			lso = o.txnFirst
		}
	}
	e := index.AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: off, LastStableOffset: lso}
	if err := appendTxnIndex(l.active().path(kafkalog.TxnIndexSuffix), e); err != nil {
		return off, fmt.Errorf("record aborted transaction: %w", err)
	}
	return off, nil
}

// appendTxnIndex appends one entry to a .txnindex file (34 bytes, big
// endian: version int16, producer id, first offset, last offset, last
// stable offset, each int64; Kafka's TransactionIndex).
func appendTxnIndex(path string, e index.AbortedTxn) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, index.TxnEntrySize)
	buf = binary.BigEndian.AppendUint16(buf, 0)
	for _, v := range []int64{e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset} {
		buf = binary.BigEndian.AppendUint64(buf, uint64(v))
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
