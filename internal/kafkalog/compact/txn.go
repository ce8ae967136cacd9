package compact

import (
	"encoding/binary"
	"sort"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// Control record types, the int16 at bytes 2..3 of a control record's key
// (Apache Kafka ControlRecordType).
const (
	controlAbort  = 0
	controlCommit = 1
)

// txnState follows the transactions met while batches are read in offset
// order, as Kafka's CleanedTransactionMetadata does (LogCleaner.scala):
//
//   - an aborted transaction (a .txnindex entry) becomes "ongoing" once a
//     batch at or past its first offset is read, and stays so until its
//     producer's ABORT marker is read;
//   - a transactional data batch of a producer with an ongoing aborted
//     transaction is aborted; any other transactional data batch marks its
//     producer's transaction as an ongoing committed one;
//   - a marker may be discarded only when no batch of its transaction was
//     read in this pass (the batches were removed by an earlier pass).
type txnState struct {
	pending   []index.AbortedTxn // not yet reached, ascending first offset
	aborted   map[int64]*abortedTxn
	committed map[int64]bool
	kept      []index.AbortedTxn // aborted transactions whose batches were read
}

type abortedTxn struct {
	txn      index.AbortedTxn
	observed bool // a batch of the transaction was read in this pass
}

func newTxnState(aborted []index.AbortedTxn) *txnState {
	p := append([]index.AbortedTxn(nil), aborted...)
	sort.SliceStable(p, func(i, j int) bool { return p[i].FirstOffset < p[j].FirstOffset })
	return &txnState{pending: p, aborted: map[int64]*abortedTxn{}, committed: map[int64]bool{}}
}

// dropEndedBefore forgets the aborted transactions whose marker lies
// below off, the first offset read: their markers will never be read, so
// they would otherwise stay ongoing and make the producer's later
// transactions look aborted.
func (t *txnState) dropEndedBefore(off int64) {
	live := t.pending[:0]
	for _, a := range t.pending {
		if a.LastOffset >= off {
			live = append(live, a)
		}
	}
	t.pending = live
}

// consumeUpTo makes every aborted transaction starting at or before off
// ongoing (CleanedTransactionMetadata.consumeAbortedTxnsUpTo).
func (t *txnState) consumeUpTo(off int64) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= off {
		a := t.pending[0]
		t.pending = t.pending[1:]
		if _, ok := t.aborted[a.ProducerID]; !ok {
			t.aborted[a.ProducerID] = &abortedTxn{txn: a}
		}
	}
}

// onData reads a data batch header and reports whether the batch belongs
// to an aborted transaction (CleanedTransactionMetadata.onBatchRead).
func (t *txnState) onData(b batch.Batch) bool {
	t.consumeUpTo(b.LastOffset)
	if !b.Transactional {
		return false
	}
	if a, ok := t.aborted[b.ProducerID]; ok {
		a.observed = true
		return true
	}
	t.committed[b.ProducerID] = true
	return false
}

// onControl reads a control batch and reports whether it may be discarded
// as far as its transaction goes (CleanedTransactionMetadata.
// onControlBatchRead): an ABORT marker once none of the aborted batches
// were read in this pass, a COMMIT marker once none of the committed
// batches were, an empty control batch (cleaned before) always, any other
// control record never. recs are the batch's records.
func (t *txnState) onControl(b batch.Batch, recs []batch.Record) bool {
	t.consumeUpTo(b.LastOffset)
	if len(recs) == 0 {
		return true
	}
	kind, ok := ControlType(recs[0].Key)
	if !ok {
		return false
	}
	switch kind {
	case controlAbort:
		a, ok := t.aborted[b.ProducerID]
		delete(t.aborted, b.ProducerID)
		if ok && a.observed {
			t.kept = append(t.kept, a.txn)
			return false
		}
		return true
	case controlCommit:
		was := t.committed[b.ProducerID]
		delete(t.committed, b.ProducerID)
		return !was
	}
	return false
}

// ControlType returns the type of a control record from its key (int16
// version, int16 type; Apache Kafka ControlRecordType.parse): 0 ABORT,
// 1 COMMIT, 2 QUORUM_REASSIGNMENT, 3 LEADER_CHANGE and so on. ok is false
// for a key shorter than 4 bytes.
func ControlType(key []byte) (kind int16, ok bool) {
	if len(key) < 4 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(key[2:])), true
}
