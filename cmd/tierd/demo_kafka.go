package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/seglog"
)

// The second topic: the same records with a key, a header and a
// timestamp, the last segment left active, so that the listener serves
// them from both tiers.
const (
	demoKeyedTopic        = "demo-keyed"
	demoKeyedRecords      = demoRecords
	demoKeyedSegmentBytes = demoSegmentBytes
)

// demoRecord is the record the demo writes at offset of the topic demo:
// the reference run's record, a 5000-byte value and a timestamp
// baseMs + offset, with no key and no headers, so that each one-record
// batch is 5070 bytes and the segments are exactly those a broker writes for them.
func demoRecord(offset, baseMs int64) seglog.Record {
	return seglog.Record{Value: demoValue(offset), Timestamp: baseMs + offset}
}

// demoKeyedRecord is the record at offset of the topic demo-keyed: the
// same value and timestamp as demoRecord, a key and one header.
func demoKeyedRecord(offset, baseMs int64) seglog.Record {
	r := demoRecord(offset, baseMs)
	r.Key = []byte(fmt.Sprintf("key-%d", offset))
	r.Headers = []seglog.RecordHeader{{Key: "tierd-demo-offset", Value: []byte(strconv.FormatInt(offset, 10))}}
	return r
}

// writeDemoTopic writes n records made by rec into a new partition
// directory with the given segment.bytes and returns the active
// segment's base offset: the local log start offset once every rolled
// segment is tiered and locally deleted. With roll, the last segment is
// rolled too, as segment.ms would, and the active segment is empty.
func writeDemoTopic(partDir string, segmentBytes, n, baseMs int64, roll bool, rec func(offset, baseMs int64) seglog.Record) (int64, error) {
	scfg := seglog.DefaultConfig()
	scfg.SegmentBytes = segmentBytes
	w, err := seglog.Open(partDir, scfg)
	if err != nil {
		return 0, err
	}
	for i := int64(0); i < n; i++ {
		if _, err := w.Append(rec(i, baseMs)); err != nil {
			w.Close()
			return 0, err
		}
	}
	if roll {
		if err := w.Roll(); err != nil {
			w.Close()
			return 0, err
		}
	}
	segs := w.Segments()
	return segs[len(segs)-1].BaseOffset, w.Close()
}

// kafkaReadBack reads partition 0 of topic through tierd's Kafka listener
// at addr with franz-go, the way any Kafka consumer would (no group, from
// the start), and counts the records among offsets 0..n-1 whose key,
// value, headers and timestamp are exactly want's.
func kafkaReadBack(ctx context.Context, addr, topic string, n, baseMs int64, want func(offset, baseMs int64) seglog.Record) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	good, next := 0, int64(0)
	for next < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return good, fmt.Errorf("read %s through the Kafka listener: stopped at offset %d: %w", topic, next, err)
		}
		for _, fe := range fs.Errors() {
			return good, fmt.Errorf("read through the Kafka listener: %s-%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		for _, r := range fs.Records() {
			if r.Offset != next {
				return good, fmt.Errorf("read %s through the Kafka listener: offset %d, want %d", topic, r.Offset, next)
			}
			if sameRecord(r, want(r.Offset, baseMs)) {
				good++
			}
			next = r.Offset + 1
		}
	}
	return good, nil
}

// sameRecord reports whether r, as a consumer read it, is w as written.
func sameRecord(r *kgo.Record, w seglog.Record) bool {
	if !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) || !bytes.Equal(r.Value, w.Value) ||
		r.Timestamp.UnixMilli() != w.Timestamp || len(r.Headers) != len(w.Headers) {
		return false
	}
	for i, h := range w.Headers {
		if r.Headers[i].Key != h.Key || !bytes.Equal(r.Headers[i].Value, h.Value) {
			return false
		}
	}
	return true
}
