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

// demoRecord is the record the demo writes at offset: a key, a value
// checked byte for byte, one header, and a timestamp baseMs + offset.
func demoRecord(offset, baseMs int64) seglog.Record {
	return seglog.Record{Key: demoKey(offset), Value: demoValue(offset), Timestamp: baseMs + offset,
		Headers: []seglog.RecordHeader{{Key: "tierd-demo-offset", Value: []byte(strconv.FormatInt(offset, 10))}}}
}

func demoKey(offset int64) []byte { return []byte(fmt.Sprintf("key-%d", offset)) }

// kafkaReadBack reads the demo partition through tierd's Kafka listener at
// addr with franz-go, the way any Kafka consumer would (no group, from the
// start), and counts the records whose offset, key, value, header and
// timestamp are exactly as written.
func kafkaReadBack(ctx context.Context, addr string, baseMs int64) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{demoTopic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	good, next := 0, int64(0)
	for next < demoRecords {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return good, fmt.Errorf("read through the Kafka listener: stopped at offset %d: %w", next, err)
		}
		for _, fe := range fs.Errors() {
			return good, fmt.Errorf("read through the Kafka listener: %s-%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		for _, r := range fs.Records() {
			if r.Offset != next {
				return good, fmt.Errorf("read through the Kafka listener: offset %d, want %d", r.Offset, next)
			}
			w := demoRecord(r.Offset, baseMs)
			if bytes.Equal(r.Key, w.Key) && bytes.Equal(r.Value, w.Value) && r.Timestamp.UnixMilli() == w.Timestamp &&
				len(r.Headers) == 1 && r.Headers[0].Key == w.Headers[0].Key && bytes.Equal(r.Headers[0].Value, w.Headers[0].Value) {
				good++
			}
			next = r.Offset + 1
		}
	}
	return good, nil
}
