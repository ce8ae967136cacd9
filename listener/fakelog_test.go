package listener

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog/batch"
)

// fakeLog is an in-memory Log for tests: whole entries (v2 batches or
// legacy messages) per partition, exactly as stored, with explicit offsets
// (log start, local log start, highest tiered, high watermark, last stable
// offset), a leader-epoch lineage and aborted transactions.
type fakeLog struct {
	mu        sync.Mutex
	topics    map[string]*fakeTopic
	topicsErr error // returned by Topics when set
}

type fakeTopic struct {
	id       [16]byte
	internal bool
	parts    map[int32]*fakePart
}

type fakePart struct {
	entries    []fakeEntry
	logStart   int64
	localStart int64 // -1: equal to the high watermark
	tiered     int64 // highest tiered offset, -1 when none
	hw         int64 // -1: the end of the last entry
	lso        int64 // -1: the high watermark
	epochs     []EpochEntry
	aborted    []fakeAborted
	err        error // returned by every call when set
}

type fakeEntry struct {
	base, last int64
	raw        []byte
	control    bool
	records    []batch.Record // every record, control records included
}

type fakeAborted struct {
	pid         int64
	first, last int64 // the transaction's first offset and its ABORT marker's offset
}

func newFakeLog() *fakeLog { return &fakeLog{topics: map[string]*fakeTopic{}} }

// topicID derives a stable test topic id from the name.
func topicID(name string) [16]byte {
	sum := sha256.Sum256([]byte(name))
	var id [16]byte
	copy(id[:], sum[:16])
	return id
}

// part returns (creating) a partition.
func (l *fakeLog) part(topic string, p int32) *fakePart {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.topics[topic]
	if t == nil {
		t = &fakeTopic{id: topicID(topic), internal: isInternal(topic), parts: map[int32]*fakePart{}}
		l.topics[topic] = t
	}
	fp := t.parts[p]
	if fp == nil {
		fp = &fakePart{localStart: -1, tiered: -1, hw: -1, lso: -1}
		t.parts[p] = fp
	}
	return fp
}

// appendRaw appends whole entries (one or more, as stored) to a partition.
func (l *fakeLog) appendRaw(t testing.TB, topic string, p int32, raw []byte) {
	t.Helper()
	var es []fakeEntry
	for pos := 0; pos < len(raw); {
		b, err := batch.ParseHeader(raw[pos:], int64(pos))
		if err != nil {
			t.Fatalf("append to %s-%d: %v", topic, p, err)
		}
		e := raw[pos : pos+int(b.Size)]
		recs, err := batch.Records(e, codec.Kafka)
		if err != nil || len(recs) == 0 {
			t.Fatalf("append to %s-%d: records of entry at %d: %v", topic, p, pos, err)
		}
		es = append(es, fakeEntry{base: recs[0].Offset, last: b.LastOffset, raw: e, control: b.Control, records: recs})
		pos += int(b.Size)
	}
	fp := l.part(topic, p)
	l.mu.Lock()
	fp.entries = append(fp.entries, es...)
	l.mu.Unlock()
}

func (l *fakeLog) get(tp TopicPartition) (*fakePart, error) {
	t := l.topics[tp.Topic]
	if t == nil || t.parts[tp.Partition] == nil {
		return nil, fmt.Errorf("fake log %s: %w", tp, ErrUnknownPartition)
	}
	fp := t.parts[tp.Partition]
	return fp, fp.err
}

func (fp *fakePart) offsets() Offsets {
	o := Offsets{LogStartOffset: fp.logStart, LocalLogStartOffset: fp.localStart, HighestTieredOffset: fp.tiered,
		HighWatermark: fp.hw, LastStableOffset: fp.lso, LeaderEpoch: -1}
	if o.HighWatermark < 0 {
		o.HighWatermark = fp.logStart
		if n := len(fp.entries); n > 0 {
			o.HighWatermark = fp.entries[n-1].last + 1
		}
	}
	if o.LocalLogStartOffset < 0 {
		o.LocalLogStartOffset = o.HighWatermark
	}
	if o.LastStableOffset < 0 {
		o.LastStableOffset = o.HighWatermark
	}
	if n := len(fp.epochs); n > 0 {
		o.LeaderEpoch = fp.epochs[n-1].Epoch
	}
	return o
}

func (l *fakeLog) Topics(context.Context) ([]Topic, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.topicsErr != nil {
		return nil, l.topicsErr
	}
	var out []Topic
	for name, t := range l.topics {
		tp := Topic{Name: name, ID: t.id, Internal: t.internal}
		for p := range t.parts {
			tp.Partitions = append(tp.Partitions, p)
		}
		sort.Slice(tp.Partitions, func(i, j int) bool { return tp.Partitions[i] < tp.Partitions[j] })
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (l *fakeLog) Offsets(_ context.Context, tp TopicPartition) (Offsets, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, err := l.get(tp)
	if err != nil {
		return Offsets{}, err
	}
	return fp.offsets(), nil
}

func (l *fakeLog) Read(ctx context.Context, tp TopicPartition, offset int64, maxBytes int, iso Isolation) (ReadResult, error) {
	if err := ctx.Err(); err != nil {
		return ReadResult{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, err := l.get(tp)
	if err != nil {
		return ReadResult{}, err
	}
	off := fp.offsets()
	if offset < off.LogStartOffset || offset > off.HighWatermark {
		return ReadResult{}, &OffsetOutOfRangeError{offset, off.LogStartOffset, off.HighWatermark}
	}
	bound := off.HighWatermark
	if iso == ReadCommitted {
		bound = off.LastStableOffset
	}
	res := ReadResult{Offsets: off}
	i := sort.Search(len(fp.entries), func(i int) bool { return fp.entries[i].last >= offset })
	end := offset
	for ; i < len(fp.entries) && fp.entries[i].base < bound; i++ {
		e := fp.entries[i]
		if len(res.Records) > 0 && len(res.Records)+len(e.raw) > maxBytes {
			break
		}
		res.Records = append(res.Records, e.raw...)
		end = e.last + 1
	}
	if iso == ReadCommitted && end > offset {
		for _, a := range fp.aborted {
			if a.first < end && a.last >= offset {
				res.Aborted = append(res.Aborted, AbortedTxn{ProducerID: a.pid, FirstOffset: a.first})
			}
		}
	}
	return res, nil
}

func (l *fakeLog) OffsetForTimestamp(_ context.Context, tp TopicPartition, ts int64, iso Isolation) (TimestampOffset, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, err := l.get(tp)
	if err != nil {
		return TimestampOffset{}, false, err
	}
	off := fp.offsets()
	for _, e := range fp.entries {
		if e.base >= off.HighWatermark {
			break
		}
		for _, r := range e.records {
			if r.Offset >= off.LogStartOffset && r.Timestamp >= ts {
				return TimestampOffset{r.Offset, r.Timestamp}, true, nil
			}
		}
	}
	return TimestampOffset{}, false, nil
}

func (l *fakeLog) MaxTimestamp(_ context.Context, tp TopicPartition, iso Isolation) (TimestampOffset, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, err := l.get(tp)
	if err != nil {
		return TimestampOffset{}, false, err
	}
	best, found := TimestampOffset{Timestamp: -1}, false
	for _, e := range fp.entries {
		for _, r := range e.records {
			if r.Offset >= fp.logStart && (!found || r.Timestamp > best.Timestamp) {
				best, found = TimestampOffset{r.Offset, r.Timestamp}, true
			}
		}
	}
	return best, found, nil
}

func (l *fakeLog) LeaderEpochs(_ context.Context, tp TopicPartition) ([]EpochEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, err := l.get(tp)
	if err != nil {
		return nil, err
	}
	return append([]EpochEntry(nil), fp.epochs...), nil
}

// set changes a partition's fields under the lock.
func (l *fakeLog) set(topic string, p int32, fn func(*fakePart)) {
	fp := l.part(topic, p)
	l.mu.Lock()
	fn(fp)
	l.mu.Unlock()
}

// v2 builds one v2 batch at base holding recs (offsets base, base+1, ...).
func v2(t testing.TB, p batch.Params, recs ...batch.Record) []byte {
	t.Helper()
	b, err := batch.AppendBatch(nil, p, recs, codec.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rec is a record with a key, a value and a timestamp (ms).
func rec(key, value string, ts int64) batch.Record {
	return batch.Record{Timestamp: ts, Key: []byte(key), Value: []byte(value)}
}

// txnParams are the params of a transactional batch of producer pid.
func txnParams(base int64, epoch int32, pid int64) batch.Params {
	p := batch.NewParams(base, epoch)
	p.Transactional, p.ProducerID, p.ProducerEpoch, p.BaseSequence = true, pid, 0, 0
	return p
}

// marker builds a transaction marker (control batch) at offset off:
// commit or abort (Kafka's EndTransactionMarker, version 0).
func marker(t testing.TB, off int64, epoch int32, pid int64, commit bool, ts int64) []byte {
	p := txnParams(off, epoch, pid)
	p.Control, p.BaseSequence = true, -1
	var typ uint16
	if commit {
		typ = 1
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), typ)
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 0)
	return v2(t, p, batch.Record{Timestamp: ts, Key: key, Value: val})
}
