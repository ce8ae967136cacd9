package remoteread

import (
	"context"
	"sort"
	"unsafe"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
)

// RemoteAbortedTxns returns the aborted transactions, from the finished
// copies' transaction indexes (.txnindex), that overlap offsets [from, to):
// LastOffset >= from and FirstOffset < to; sorted by FirstOffset, each
// once. A transaction's entry is in the index of the segment holding its
// abort marker, which may lie past to; so, as Kafka's fetch path does, the
// search reads the index of the copy holding from and of the copies after
// it until an entry whose LastStableOffset >= to shows that every
// transaction started below to had ended by then. Entries of transactions
// whose marker lies past the highest tiered offset are only in the local
// segments' .txnindex: a caller joining the tiers searches those too.
// Parsed indexes stay in the index cache; a copy with TxnIndexPresent
// false makes no GET. Errors as ReadRemote (ErrStillLoading aside): a
// missing or corrupt index is ErrDataLoss.
func (s *Engine) RemoteAbortedTxns(ctx context.Context, tp remotelog.TopicPartition, from, to int64) ([]index.AbortedTxn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.conf().RequestTimeout)
	defer cancel()
	return s.abortedTxns(ctx, tp, from, to)
}

func (s *Engine) abortedTxns(ctx context.Context, tp remotelog.TopicPartition, from, to int64) ([]index.AbortedTxn, error) {
	out, err := retrying(func() ([]index.AbortedTxn, error) {
		if from < 0 {
			return nil, invalidf("from offset must be >= 0 (got %d)", from)
		}
		_, fin, err := s.partitionState(tp)
		if err != nil || to <= from {
			return nil, err
		}
		var out []index.AbortedTxn
		for m := range fin.from(from) {
			meta := *m
			if !meta.TxnIndexPresent {
				continue
			}
			txns, err := s.txnIndex(ctx, meta)
			if err != nil {
				return nil, missing(meta, err)
			}
			complete := false
			for _, t := range txns {
				if t.LastOffset >= from && t.FirstOffset < to {
					out = append(out, t)
				}
				if t.LastStableOffset >= to {
					complete = true
					break
				}
			}
			if complete {
				break
			}
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].FirstOffset != out[j].FirstOffset {
				return out[i].FirstOffset < out[j].FirstOffset
			}
			return out[i].ProducerID < out[j].ProducerID
		})
		return dedupTxns(out), nil
	})
	s.noteMissing(err, tp, "offset", from)
	return out, s.unreachable(classify(err))
}

// dedupTxns drops repeated entries of a sorted list (the same abort seen
// in two copies of one offset range).
func dedupTxns(txns []index.AbortedTxn) []index.AbortedTxn {
	if len(txns) < 2 {
		return txns
	}
	out := txns[:1]
	for _, t := range txns[1:] {
		if last := out[len(out)-1]; t.ProducerID != last.ProducerID || t.FirstOffset != last.FirstOffset {
			out = append(out, t)
		}
	}
	return out
}

// txnItemOverhead is what a cached transaction index costs beyond its
// entries, bytes (so that empty indexes count too).
const txnItemOverhead = 64

// txnIndex returns a copy's parsed transaction index (none when the copy
// has none); it is loaded only when aborted transactions are asked for.
func (s *Engine) txnIndex(ctx context.Context, meta remotelog.SegmentMetadata) ([]index.AbortedTxn, error) {
	if !meta.TxnIndexPresent {
		return nil, nil
	}
	v, err := s.idx.load(ctx, s.conf().RequestTimeout, indexKey{meta.ID, remotelog.TransactionIndex}, func(ctx context.Context) (any, int64, error) {
		raw, err := s.fetchIndex(ctx, meta, remotelog.TransactionIndex)
		if err != nil {
			return nil, 0, err
		}
		txns, err := index.ParseTxnIndex(raw)
		if err != nil {
			return nil, 0, kafkalog.WithFile(err, meta.ID.String()+".txnindex")
		}
		return txns, txnItemOverhead + int64(cap(txns))*int64(unsafe.Sizeof(index.AbortedTxn{})), nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]index.AbortedTxn), nil
}
