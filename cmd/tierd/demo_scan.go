package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// scanRecord is one record a scan read: its offset, key, and value (nil
// for a tombstone).
type scanRecord struct {
	Offset int64
	Key    string
	Value  []byte
}

// scanResult is what a scan consumer saw of one partition, from its log
// start offset to its high watermark.
type scanResult struct {
	Records []scanRecord
	// Latest is key -> latest value, as a compacted topic's reader builds
	// it: a tombstone removes its key.
	Latest map[string][]byte
	// HighWatermark is the partition's end offset when the scan began.
	HighWatermark int64
}

// scanPartition reads partition 0 of topic through the Kafka listener at
// addr the way a plain scan consumer does (franz-go, no group, from
// the start, up to the high watermark read first) and returns the records
// and the key -> latest value map. Errors: the listener's fetch or
// ListOffsets errors, an offset that goes backwards, or ctx's error (the
// scan gives up after 60 s).
func scanPartition(ctx context.Context, addr, topic string) (scanResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return scanResult{}, err
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	adm.Close()
	if err != nil {
		return scanResult{}, fmt.Errorf("list end offsets: %w", err)
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok {
		return scanResult{}, fmt.Errorf("list end offsets: no answer for %s-0", topic)
	}
	if end.Err != nil {
		return scanResult{}, fmt.Errorf("list end offsets: %w", end.Err)
	}
	res := scanResult{Latest: map[string][]byte{}, HighWatermark: end.Offset}
	if end.Offset == 0 {
		return res, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	next := int64(-1)
	for next < end.Offset-1 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("scan %s-0: stopped after offset %d of %d: %w", topic, next, end.Offset, err)
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return res, fmt.Errorf("scan %s-0: %w", topic, fe.Err)
			}
		}
		for _, r := range fs.Records() {
			if r.Offset <= next {
				return res, fmt.Errorf("scan %s-0: offset %d after %d", topic, r.Offset, next)
			}
			next = r.Offset
			if r.Offset >= end.Offset {
				continue // appended after the scan began
			}
			res.Records = append(res.Records, scanRecord{Offset: r.Offset, Key: string(r.Key), Value: r.Value})
			if r.Value == nil {
				delete(res.Latest, string(r.Key))
			} else {
				res.Latest[string(r.Key)] = r.Value
			}
		}
	}
	return res, nil
}
