package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/seglog"
)

// The big partition: 8192 records of 32 KiB (256 MiB) in 4 MiB segments.
const (
	bigRecords   = 8192
	bigValueSize = 32 << 10
)

// bigFillers are the bodies the big partition's values cycle through.
var bigFillers = func() [16][]byte {
	var f [16][]byte
	for i := range f {
		f[i] = bytes.Repeat([]byte(fmt.Sprintf("tierd big partition filler %02d|", i)), bigValueSize/30+1)[:bigValueSize-8]
	}
	return f
}()

// bigRecord is the record at offset: key "big-<offset>", a value of the
// offset (8 bytes, big endian) and a filler chosen by it, and timestamp
// base + 2*offset ms.
func bigRecord(off, base int64) seglog.Record {
	v := make([]byte, 8, bigValueSize)
	binary.BigEndian.PutUint64(v, uint64(off))
	return seglog.Record{Key: []byte("big-" + strconv.FormatInt(off, 10)), Value: append(v, bigFillers[off%16]...), Timestamp: base + 2*off}
}

// checkBig says what is wrong with a record a client read as offset want.
func checkBig(c crec, want, base int64) error {
	w := bigRecord(want, base)
	if c.offset != want || !bytes.Equal(c.key, w.Key) || c.ts != w.Timestamp || !bytes.Equal(c.value, w.Value) {
		return fmt.Errorf("got offset %d key %s ts %d value %s, want offset %d key %s ts %d", c.offset, short(c.key), c.ts, short(c.value),
			want, w.Key, w.Timestamp)
	}
	return nil
}

// TestKafkaKcatBigTieredPartition: a 256 MiB partition written by the
// segment log in 4 MiB segments, copied to MinIO, is read by franz-go
// from the start while local retention deletes most of its segments under
// it, then by kcat through the whole tierd: from the beginning to the
// end with every key, value and timestamp checked; from a timestamp (-o
// s@TS) inside a tiered segment; the last 10 records (-o -10); and from the
// end (-o end) while new records are appended.
func TestKafkaKcatBigTieredPartition(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	srv := rsmtest.StartMinIO(t)
	srv.CreateBucket(t, "kafka-big")
	mcfg := minio.DefaultConfig()
	mcfg.Endpoint, mcfg.Bucket, mcfg.Insecure = srv.Endpoint, "kafka-big", true
	b, err := minio.New(mcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newKWorldOn(t, b, t.TempDir())
	start := time.Now()
	scfg := seglog.DefaultConfig()
	scfg.SegmentBytes = 4 << 20
	l, err := seglog.Open(filepath.Join(w.logDir, "big-0"), scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	base := time.Now().Add(-24 * time.Hour).UnixMilli()
	for off := int64(0); off < bigRecords; off++ {
		if _, err := l.Append(bigRecord(off, base)); err != nil {
			t.Fatal(err)
		}
	}
	wrote := time.Since(start)
	// The copier copies every rolled segment, keeping them locally; a
	// franz-go consumer starts reading from the start (local segments),
	// and local retention then deletes the segments under it.
	w.tier(topics.Retention{LocalRetentionMs: ptr(-1), LocalRetentionBytes: ptr(-1)})
	copied := time.Since(start) - wrote
	var progress atomic.Int64
	scanned := make(chan error, 1)
	go func() { scanned <- kgoScanBig(w.addr, base, &progress) }()
	for progress.Load() < 300 {
		select {
		case err := <-scanned:
			t.Fatalf("franz-go: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	before := progress.Load()
	w.tier(topics.Retention{LocalRetentionBytes: ptr(8 << 20)})
	after := progress.Load()
	if err := <-scanned; err != nil {
		t.Fatalf("franz-go reading while local retention deleted the segments: %v", err)
	}
	t.Logf("franz-go had read %d to %d records while local retention deleted the segments; it read on to offset %d remotely", before, after, bigRecords/2)
	o := w.offsets("big", 0)
	locals := localLogs(t, l.Dir())
	if o.LocalLogStartOffset < bigRecords*3/4 || o.HighestTieredOffset+1 < o.LocalLogStartOffset || len(locals) > 4 {
		t.Fatalf("not mostly tiered: remote offsets %+v, local segments %v", o, locals)
	}
	t.Logf("256 MiB written in %v, %d segments copied in %v; local segments from offset %d: %v", wrote, len(l.Segments())-len(locals),
		copied, o.LocalLogStartOffset, locals)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	read := func(args []string, first int64, n int, notes io.Writer) error {
		next := first
		err := runKcat(ctx, kcat, w.addr, append([]string{"-t", "big", "-p", "0"}, args...), func(c crec) error {
			if err := checkBig(c, next, base); err != nil {
				return err
			}
			next++
			return nil
		}, notes)
		if err == nil && next != first+int64(n) {
			err = fmt.Errorf("read offsets %d to %d, want %d records from %d", first, next-1, n, first)
		}
		if err != nil {
			return fmt.Errorf("kcat %v: %w", args, err)
		}
		return nil
	}
	start = time.Now()
	if err := read([]string{"-o", "beginning", "-e"}, 0, bigRecords, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("kcat -o beginning -e: %d records, 256 MiB, in %v", bigRecords, time.Since(start))

	// A timestamp between two records in a tiered segment: the first
	// record at or after it.
	at := o.LocalLogStartOffset / 2
	if err := read([]string{"-o", "s@" + strconv.FormatInt(base+2*at-1, 10), "-c", "5"}, at, 5, nil); err != nil {
		t.Fatal(err)
	}
	if err := read([]string{"-o", "-10", "-e"}, bigRecords-10, 10, nil); err != nil {
		t.Fatal(err)
	}

	// From the end: kcat resolves the end offset and long-polls (it says
	// so: "Reached end of topic"); the records appended meanwhile reach it.
	atEnd := &watchWriter{want: fmt.Sprintf("Reached end of topic big [0] at offset %d", bigRecords), seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- read([]string{"-o", "end", "-c", "20"}, bigRecords, 20, atEnd) }()
	select {
	case err := <-done:
		t.Fatalf("kcat -o end ended before reaching the end: %v", err)
	case <-atEnd.seen:
	}
	for off := int64(bigRecords); off < bigRecords+20; off++ {
		if _, err := l.Append(bigRecord(off, base)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// kgoScanBig reads the first half of the big partition with franz-go,
// checking each record, and counts the records read in progress.
func kgoScanBig(addr string, base int64, progress *atomic.Int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"big": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for next := int64(0); next < bigRecords/2; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("stopped at offset %d: %w", next, ctx.Err())
		}
		for _, fe := range fs.Errors() {
			return fmt.Errorf("at offset %d: %w", next, fe.Err)
		}
		for _, r := range fs.Records() {
			if err := checkBig(kgoRecord(r), next, base); err != nil {
				return err
			}
			next++
			progress.Store(next)
		}
	}
	return nil
}

// watchWriter closes seen once the text written to it contains want.
type watchWriter struct {
	mu   sync.Mutex
	buf  []byte
	want string
	seen chan struct{}
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf == nil || !bytes.Contains(w.buf, []byte(w.want)) {
		w.buf = append(w.buf, p...)
		if bytes.Contains(w.buf, []byte(w.want)) {
			close(w.seen)
		}
	}
	return len(p), nil
}
