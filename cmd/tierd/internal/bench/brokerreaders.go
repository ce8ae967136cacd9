package bench

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/remoteread"
)

// This file holds readers_N's "broker" pattern: N readers reading the
// copies as a Kafka broker's RemoteStorageManager plugin does through
// tierd's RSM endpoint, by byte ranges of a copy's .log
// (remoteread.Engine.WriteLogRange), against a read engine in the bench
// process started afresh for each N (empty cache). Each reader starts at
// its own copy, spread evenly over the log, and makes the broker's
// consumer fetches: a stream from a byte position of one window of
// MaxBytes (the plugin's first window, which is what a consumer fetch of
// max.partition.fetch.bytes takes), of which the broker keeps the whole
// batches; the next fetch's stream starts at the offset index entry of
// the first batch not kept, a little before where the last stream ended
// (one entry per batch here, as the bench's batches are larger than
// index.interval.bytes), and at the copy's end the reader goes on to the
// next copy, wrapping at the log's end. Every window is compared byte for
// byte with the local segment file. The HTTP hop to the endpoint (package
// rsmapi) is not in it: this measures the bytes tierd fetches for such
// readers and its read path's time.

// noMetadata is the Metadata of the broker pattern's read engine:
// WriteLogRange reads by the copy's metadata the caller gives, never the
// metadata store.
type noMetadata struct{}

func (noMetadata) Partitions() ([]remotelog.TopicPartition, error) { return nil, nil }
func (noMetadata) Segments(remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	return nil, nil
}
func (noMetadata) Offsets(remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error) {
	return remotelog.PartitionOffsets{}, false, nil
}
func (noMetadata) PartitionVersion(remotelog.TopicPartition) remotelog.Version {
	return remotelog.Version{}
}
func (noMetadata) ChangesSince(remotelog.TopicPartition, remotelog.Version) ([]remotelog.Change, remotelog.Version, bool) {
	return nil, remotelog.Version{}, false
}
func (noMetadata) FinishedSnapshot(remotelog.TopicPartition) (remotelog.Version, remotelog.PartitionOffsets, bool, []remotelog.SegmentMetadata, error) {
	return remotelog.Version{}, remotelog.PartitionOffsets{}, false, nil, nil
}

// brokerRun is one readers_N run of the broker pattern: n readers at
// once against a fresh in-process read engine, each reading
// cfg.readerBytes(n) as described above.
func (e *env) brokerRun(ctx context.Context, n int) (readersOut, error) {
	var o readersOut
	reg := prometheus.NewRegistry()
	srv, err := remoteread.New(e.fcfg.Config, noMetadata{}, e.mgr, remoteread.WithRegisterer(reg))
	if err != nil {
		return o, err
	}
	defer srv.Close()
	gather := func() map[string]float64 { return gatherSums(reg) }
	r := newResult(fmt.Sprintf("readers_%d", n))
	m0 := gather()
	c0 := e.cpu()
	per := e.cfg.readerBytes(n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			part := newResult("")
			seg, pos := i*len(e.fin)/n, int64(0)
			var err error
			for read := int64(0); read < per && err == nil; {
				var got int64
				got, seg, pos, err = e.brokerFetch(ctx, srv, seg, pos, part)
				read += got
			}
			mu.Lock()
			defer mu.Unlock()
			r.merge(part)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	r.wall = time.Since(start)
	c := e.cpu().sub(c0)
	o.res, o.peak = r, -1
	o.cpu.bench, o.cpu.store, o.cpu.tierd = c.proc, c.store, -1
	if firstErr != nil {
		return o, firstErr
	}
	srv.Settle()
	m := gather()
	o.fetched, o.unread = fetchedBytes(m)-fetchedBytes(m0), m["tierd_cache_prefetch_bytes"]
	return o, nil
}

// brokerFetch is one consumer fetch of a broker reader: a window of
// MaxBytes of copy seg from byte pos, compared with the local file; it
// returns the bytes served and where the next fetch's stream starts.
func (e *env) brokerFetch(ctx context.Context, srv *remoteread.Engine, seg int, pos int64, r *Result) (int64, int, int64, error) {
	meta := e.fin[seg]
	var buf bytes.Buffer
	t := time.Now()
	got, err := srv.WriteLogRange(ctx, e.mgr, meta, pos, int64(e.cfg.MaxBytes), &buf)
	r.add(time.Since(t), got)
	if err != nil {
		return 0, seg, pos, fmt.Errorf("broker read of %s bytes %d-%d: %w", meta.ID, pos, pos+int64(e.cfg.MaxBytes), err)
	}
	local := e.maps[seg]
	if pos+got > int64(len(local)) || !bytes.Equal(buf.Bytes(), local[pos:pos+got]) {
		return 0, seg, pos, fmt.Errorf("broker read of %s bytes %d-%d: %d bytes that differ from the local segment's", meta.ID, pos, pos+int64(e.cfg.MaxBytes), got)
	}
	end := pos + got
	if end >= meta.SizeInBytes {
		return got, (seg + 1) % len(e.fin), 0, nil
	}
	// The broker keeps the whole batches; the next fetch starts at the
	// first batch not kept (its offset index entry).
	bs := e.batches[seg]
	i := sort.Search(len(bs), func(i int) bool { return bs[i].End() > end })
	next := bs[i].Position
	if next <= pos { // a batch larger than the window: the broker reads it whole next time
		next = bs[i].End()
	}
	return got, seg, next, nil
}
