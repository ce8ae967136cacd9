package bench

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/logview"
)

// This file holds the Kafka cases: the same reads as fetch_cold and replay,
// made by a Kafka client through tierd's Kafka listener. The listener
// serves a logview over the same in-process read engine the gRPC cases
// use, with no log dirs, so every read goes to the remote tier (chunk
// cache, prefetch, index cache) exactly as a gRPC Fetch does.

// pollTimeout bounds how long kafka_replay waits for records before it
// fails: the whole log is there, so a wait this long means a fault.
const pollTimeout = 30 * time.Second

// serveKafka starts tierd's Kafka listener on its own 127.0.0.1 socket,
// over a logview of the in-process read engine with no log dirs, and sets
// e.kafka to its address. It returns the function that stops it.
func (e *env) serveKafka() (stop func(), err error) {
	view, err := logview.New(logview.DefaultConfig(), e.server.Engine())
	if err != nil {
		return nil, err
	}
	lcfg := listener.DefaultConfig()
	lcfg.FetchMaxBytes = max(lcfg.FetchMaxBytes, e.cfg.MaxBytes)
	ks, err := listener.New(lcfg, view, listener.WithRegisterer(e.reg))
	if err != nil {
		return nil, err
	}
	lis, err := listen()
	if err != nil {
		return nil, err
	}
	e.kafka = lis.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ks.Serve(ctx, lis) }()
	return func() { cancel(); <-done }, nil
}

// kafkaClient sends raw Fetch requests to the listener through a franz-go
// client, as kafka_fetch_cold's reads.
type kafkaClient struct {
	cl       *kgo.Client
	topicID  [16]byte // Fetch v13+ names topics by id
	maxBytes int32
}

// dialKafka connects a franz-go client to the listener and learns the
// bench topic's id from Metadata.
func (e *env) dialKafka(ctx context.Context) (*kafkaClient, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafka))
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && (len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0) {
		err = fmt.Errorf("kafka Metadata of %s: %+v", topic, resp.Topics)
	}
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &kafkaClient{cl: cl, topicID: resp.Topics[0].TopicID, maxBytes: e.cfg.MaxBytes}, nil
}

func (k *kafkaClient) close() { k.cl.Close() }

// fetch sends one Fetch of partition 0 from offset, with max_bytes and
// partition_max_bytes both the gRPC Fetch's max_bytes, at the highest
// version both sides speak, and returns the records and the offset after
// their last batch (offset when there are none). Errors: the request's,
// a Kafka error code, an answer for other partitions, or records whose
// batch headers do not parse.
func (k *kafkaClient) fetch(ctx context.Context, offset int64) ([]byte, int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 500, 1, k.maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, k.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, offset, k.maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, k.cl)
	if err != nil {
		return nil, 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, 0, fmt.Errorf("kafka Fetch at offset %d: %w", offset, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != 0 {
		return nil, 0, fmt.Errorf("kafka Fetch at offset %d: answered %d topics, not partition %s-0 alone", offset, len(resp.Topics), topic)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return nil, 0, fmt.Errorf("kafka Fetch at offset %d: %w", offset, err)
	}
	next := offset
	for pos := 0; pos < len(p.RecordBatches); {
		b, err := batch.ParseHeader(p.RecordBatches[pos:], int64(pos))
		if err != nil {
			return nil, 0, fmt.Errorf("kafka Fetch at offset %d: %w", offset, err)
		}
		next, pos = b.LastOffset+1, pos+int(b.Size)
	}
	return p.RecordBatches, next, nil
}

// replayHooks collects, from franz-go's hooks, each Fetch's time from
// writing the request to having read the whole response, and the batches
// read. The hooks run on the client's goroutines.
type replayHooks struct {
	mu      sync.Mutex
	r       *Result
	stopped bool
	batches int64
	records int64
	bytes   int64 // whole batches: franz-go counts a v2 batch's records section
}

func (h *replayHooks) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != int16(kmsg.Fetch) || e2e.Err() != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped { // not the long poll at the end of the log
		h.r.add(e2e.DurationE2E(), 0)
	}
}

func (h *replayHooks) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.batches++
	h.records += int64(m.NumRecords)
	h.bytes += int64(m.CompressedBytes) + batch.HeaderSize
}

// kafkaReplay is replay through the Kafka listener: with empty caches, a
// franz-go consumer (assign-style, no group) from the log's start reads
// every offset of the tiered log, checking that offsets follow on and each
// value is the one written, and that the batches add up to the tiered
// bytes. Each Fetch asks what a replay Fetch asks: FetchMaxBytes and
// FetchMaxPartitionBytes are both max_bytes (franz-go's own defaults, 50
// MiB and 1 MiB, give the same requests for one partition at the default
// 1 MiB max_bytes). The time runs from creating the client, so it
// includes franz-go's Metadata and ListOffsets, as a consumer's start
// does. It records the time taken (wall) over the tiered bytes, the GETs
// made and each Fetch's latency.
func (e *env) kafkaReplay(ctx context.Context) (*Result, error) {
	e.server.Engine().DropCaches(true)
	r := newResult("kafka_replay")
	h := &replayHooks{r: r}
	first, last := e.fin[0].StartOffset, e.fin[len(e.fin)-1].EndOffset
	before := e.gets()
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafka),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxBytes(e.cfg.MaxBytes), kgo.FetchMaxPartitionBytes(e.cfg.MaxBytes), kgo.WithHooks(h))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	next := first
	for next <= last {
		pctx, cancel := context.WithTimeout(ctx, pollTimeout)
		fs := cl.PollFetches(pctx)
		timedOut := pctx.Err() != nil
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if timedOut {
			return nil, fmt.Errorf("kafka_replay: no records for %s at offset %d (the log ends at %d): %v", pollTimeout, next, last, fs.Errors())
		}
		for _, fe := range fs.Errors() {
			return nil, fmt.Errorf("kafka_replay at offset %d: %s-%d: %w", next, fe.Topic, fe.Partition, fe.Err)
		}
		var bad error
		fs.EachRecord(func(rec *kgo.Record) {
			switch {
			case bad != nil:
			case rec.Offset != next || rec.Offset > last:
				bad = fmt.Errorf("kafka_replay: offset %d after %d (the log ends at %d)", rec.Offset, next-1, last)
			case !bytes.Equal(rec.Value, valueAt(e.values, rec.Offset, e.cfg.RecordBytes)):
				bad = fmt.Errorf("kafka_replay: offset %d: the value is not the one written", rec.Offset)
			default:
				next++
			}
		})
		if bad != nil {
			return nil, bad
		}
	}
	r.wall = time.Since(start)
	h.mu.Lock()
	h.stopped = true
	nb, nr, n := h.batches, h.records, h.bytes
	h.mu.Unlock()
	if n != e.tieredBytes() || nr != last-first+1 {
		return nil, fmt.Errorf("kafka_replay read %d records in %d batches of %d bytes, the tiered log holds %d records in %d bytes",
			nr, nb, n, last-first+1, e.tieredBytes())
	}
	r.bytes = n
	r.gets = e.gets() - before
	return r, nil
}
