package e2e

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/seglog"
)

// txnLog is partition txn-0 written by the segment log with transactions
// (seglog.AppendTransactional, EndTransaction) in three segments: A and B
// rolled (tiered and deleted locally), C active (local).
//
//	A: plain; producer 101 (aborted) and 102 (committed) opened and ended
//	   here, so both outcomes lie wholly in a tiered segment; 103 (to be
//	   committed) and 104 (to be aborted) opened
//	B: more of 103's and 104's records
//	C: 103's COMMIT and 104's ABORT (their data tiered, their markers and
//	   104's .txnindex entry local); 105 (committed) and 106 (aborted)
//	   wholly local; plain
type txnLog struct {
	all       []batch.Record // every data record, by offset
	committed []batch.Record // the records read_committed gives
	local     int64          // C's base offset
}

func writeTxnLog(t *testing.T, dir string) *txnLog {
	t.Helper()
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = seglog.MinSegmentBytes
	l, err := seglog.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tl := &txnLog{}
	base := time.Now().Add(-time.Hour).UnixMilli()
	n := 0
	rec := func(what string) seglog.Record {
		n++
		return seglog.Record{Key: []byte(fmt.Sprintf("key-%d", n%7)), Value: append([]byte(fmt.Sprintf("%s #%d|", what, n)), bytes.Repeat([]byte{'t'}, 1000)...),
			Timestamp: base + int64(n)}
	}
	add := func(off int64, r seglog.Record, visible bool) {
		r.Offset = off
		tl.all = append(tl.all, r)
		if visible {
			tl.committed = append(tl.committed, r)
		}
	}
	plain := func(k int) {
		for range k {
			r := rec("plain")
			off, err := l.Append(r)
			if err != nil {
				t.Fatal(err)
			}
			add(off, r, true)
		}
	}
	commits := map[int64]bool{101: false, 102: true, 103: true, 104: false, 105: true, 106: false}
	txn := func(pid int64, k int) {
		for range k {
			r := rec(fmt.Sprintf("producer %d (commits: %v)", pid, commits[pid]))
			off, err := l.AppendTransactional(pid, 0, r)
			if err != nil {
				t.Fatal(err)
			}
			add(off, r, commits[pid])
		}
	}
	end := func(pids ...int64) {
		for _, pid := range pids {
			if _, err := l.EndTransaction(pid, 0, commits[pid]); err != nil {
				t.Fatal(err)
			}
		}
	}
	roll := func() {
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	plain(3)
	txn(101, 3)
	plain(2)
	txn(102, 2)
	txn(101, 2)
	end(101, 102)
	plain(2)
	txn(103, 3)
	txn(104, 3)
	plain(2)
	roll()
	txn(103, 2)
	plain(2)
	txn(104, 2)
	roll()
	tl.local = l.HighWatermark()
	plain(1)
	end(103, 104)
	txn(105, 2)
	txn(106, 2)
	plain(1)
	end(105, 106)
	plain(3)
	return tl
}

// TestKafkaReadCommittedAcrossTiers: over a log whose transactions end in
// a tiered segment or across the tier boundary (data tiered, marker and
// .txnindex entry local), read_committed clients (franz-go
// FetchIsolationLevel(ReadCommitted), confluent-kafka and kcat with
// isolation.level=read_committed, librdkafka's default, sarama with
// ReadCommitted) get exactly the plain and committed records, and
// read_uncommitted clients every data record; none gets a control record.
func TestKafkaReadCommittedAcrossTiers(t *testing.T) {
	t.Parallel()
	w := newKWorld(t)
	tl := writeTxnLog(t, filepath.Join(w.logDir, "txn-0"))
	w.tier(topics.Retention{LocalRetentionMs: ptr(0)})
	if o, locals := w.offsets("txn", 0), localLogs(t, filepath.Join(w.logDir, "txn-0")); o.HighestTieredOffset != tl.local-1 ||
		!slices.Equal(locals, []int64{tl.local}) {
		t.Fatalf("segments A and B not tiered: remote offsets %+v, local segments %v (C at %d)", o, locals, tl.local)
	}
	tp := tpKey{Topic: "txn", Partition: 0}
	last := tl.all[len(tl.all)-1].Offset
	t.Logf("%d data records, %d committed or plain; local segment from %d", len(tl.all), len(tl.committed), tl.local)
	check := func(t *testing.T, got []crec, committed bool) {
		t.Helper()
		want := tl.all
		if committed {
			want = tl.committed
		}
		if err := sameRecords(got, want); err != nil {
			t.Fatal(err)
		}
	}
	for _, committed := range []bool{true, false} {
		iso := map[bool]string{true: "read_committed", false: "read_uncommitted"}[committed]
		t.Run("franz-go/"+iso, func(t *testing.T) {
			var opts []kgo.Opt
			if committed {
				opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			}
			got, err := kgoRead(w.addr, map[tpKey]int64{tp: last}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			check(t, got[tp], committed)
		})
		t.Run("kcat/"+iso, func(t *testing.T) {
			var extra []string
			if !committed { // librdkafka reads committed by default
				extra = []string{"-X", "isolation.level=read_uncommitted"}
			}
			got, err := kcatAll(needKcat(t), w.addr, tp, extra...)
			if err != nil {
				t.Fatal(err)
			}
			check(t, got, committed)
		})
		t.Run("confluent-kafka/"+iso, func(t *testing.T) {
			needPython(t, "confluent_kafka")
			got, err := pythonRead("confluent-kafka", w.addr, iso, map[tpKey]int64{tp: last})
			if err != nil {
				t.Fatal(err)
			}
			check(t, got[tp], committed)
		})
		t.Run("sarama/"+iso, func(t *testing.T) {
			cfg := sarama.NewConfig()
			if committed {
				cfg.Consumer.IsolationLevel = sarama.ReadCommitted
			}
			got, err := saramaRead(w.addr, tp, last, cfg)
			if err != nil {
				t.Fatal(err)
			}
			check(t, got, committed)
		})
	}
	if n := w.refused(); n != 0 {
		t.Errorf("the listener refused %v requests of the clients", n)
	}
}

// TestKafkaCompactedScanAcrossTiers: the plain scan pattern. A franz-go consumer without a group
// (kgo.ConsumePartitions from AtStart) reads a compacted topic (keys
// updated many times, tombstones, offset gaps between and inside batches
// where the cleaner removed records, the cleaned part tiered and deleted
// locally) up to the end offset it was given, record by record as
// stored, and rebuilds the key -> latest value map exactly: tombstoned keys
// absent.
func TestKafkaCompactedScanAcrossTiers(t *testing.T) {
	t.Parallel()
	w := newKWorld(t)
	cl := writeCompactedLog(t, filepath.Join(w.logDir, "scan-0"))
	w.tier(topics.Retention{LocalRetentionMs: ptr(0)})
	if o := w.offsets("scan", 0); o.LocalLogStartOffset != cl.active || o.HighestTieredOffset != cl.active-1 {
		t.Fatalf("not tiered up to the active segment at %d: %+v", cl.active, o)
	}
	tp := tpKey{Topic: "scan", Partition: 0}

	// The scan: the end offset first, then records until it is reached.
	kc, err := kgo.NewClient(kgo.SeedBrokers(w.addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"scan": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	end := listEnd(t, ctx, kc, tp)
	if end != cl.end {
		t.Fatalf("end offset %d, want %d", end, cl.end)
	}
	state := map[string][]byte{}
	var got []crec
	for len(got) == 0 || got[len(got)-1].offset < end-1 {
		fs := kc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("scan stopped at %d records of %d", len(got), len(cl.stored))
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("scan: %v", errs)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, kgoRecord(r))
			if r.Value == nil {
				delete(state, string(r.Key))
			} else {
				state[string(r.Key)] = r.Value
			}
		})
	}
	if err := sameRecords(got, cl.stored); err != nil {
		t.Fatal(err)
	}
	if len(state) != len(cl.latest) {
		t.Errorf("rebuilt %d keys, want %d", len(state), len(cl.latest))
	}
	for k, v := range cl.latest {
		if !bytes.Equal(state[k], v) {
			t.Errorf("key %s: rebuilt %s, want %s", k, short(state[k]), short(v))
		}
	}
	t.Logf("%d updates of %d keys compacted to %d records (%d offsets compacted away: gaps); %d live keys, %d tombstoned",
		cl.updates, cl.keys, len(cl.stored), cl.end-int64(len(cl.stored)), len(cl.latest), cl.keys-len(cl.latest))
}

// TestKafkaSaramaTieredPartition: sarama's partition consumer, with its
// defaults, reads the compacted partition, its cleaned part tiered and
// deleted locally, from the oldest offset to the end, record by record.
func TestKafkaSaramaTieredPartition(t *testing.T) {
	t.Parallel()
	w := newKWorld(t)
	cl := writeCompactedLog(t, filepath.Join(w.logDir, "scan-0"))
	w.tier(topics.Retention{LocalRetentionMs: ptr(0)})
	if o := w.offsets("scan", 0); o.LocalLogStartOffset != cl.active {
		t.Fatalf("not tiered up to the active segment at %d: %+v", cl.active, o)
	}
	got, err := saramaRead(w.addr, tpKey{Topic: "scan", Partition: 0}, cl.end-1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameRecords(got, cl.stored); err != nil {
		t.Fatal(err)
	}
}
