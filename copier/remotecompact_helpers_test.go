package copier

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/checkpoint"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// compactCounter reads remote compaction's counter
// tierd_copier_remote_compaction_<name> from the copier's registry.
func compactCounter(t *testing.T, c *Copier, name string) float64 {
	t.Helper()
	mfs, err := c.reg.(prometheus.Gatherer).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tierd_copier_remote_compaction_"+name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric tierd_copier_remote_compaction_%s", name)
	return 0
}

// update is one keyed record of a test history; tomb makes it a
// tombstone.
type update struct {
	key, value string
	tomb       bool
}

// history is a compacted topic's partition as written: every update at
// its offset, and the model of what a reader must find, the latest value
// of each key (tombstoned keys absent).
type history struct {
	updates []update
}

// latest returns key -> latest value over offsets [0, end).
func (h *history) latest(end int64) map[string]string {
	out := map[string]string{}
	for off, u := range h.updates {
		if int64(off) >= end {
			break
		}
		if u.tomb {
			delete(out, u.key)
		} else {
			out[u.key] = u.value
		}
	}
	return out
}

// writeKeyedSegment appends updates to the history and writes them as a
// rolled segment at the history's next offset, perBatch records to a
// batch (the batches of segments a broker's cleaner already cleaned, with
// horizon set by prepare when not nil), with an empty .index and a
// .timeindex holding the max timestamp. It returns the base offset.
func (h *history) writeKeyedSegment(t *testing.T, dir string, ts int64, perBatch int, prepare func([]byte) []byte, us ...update) int64 {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := int64(len(h.updates))
	var log []byte
	for i := 0; i < len(us); i += perBatch {
		var recs []batch.Record
		for _, u := range us[i:min(i+perBatch, len(us))] {
			r := batch.Record{Timestamp: ts, Key: []byte(u.key)}
			if !u.tomb {
				r.Value = []byte(u.value)
			}
			recs = append(recs, r)
		}
		b, err := batch.AppendBatch(nil, batch.NewParams(base+int64(i), 0), recs, nil)
		if err != nil {
			t.Fatal(err)
		}
		if prepare != nil {
			b = prepare(b)
		}
		log = append(log, b...)
	}
	h.updates = append(h.updates, us...)
	write := func(suffix string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, kafkalog.FileName(base, suffix)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(kafkalog.LogSuffix, log)
	write(kafkalog.IndexSuffix, nil)
	ti, _ := index.AppendTimeEntry(nil, base, index.TimeEntry{Timestamp: ts, Offset: int64(len(h.updates)) - 1})
	write(kafkalog.TimeIndexSuffix, ti)
	return base
}

// activeSegment writes the empty active segment at the history's end.
//
// The log dir's cleaner-offset-checkpoint then names the active segment's
// base offset as the partition's first dirty offset, as the broker's
// cleaner leaves it after a pass, so that the copier copies the rolled
// segments (it copies a compacted topic's segments only below it).
func (h *history) activeSegment(t *testing.T, dir string) {
	t.Helper()
	base := int64(len(h.updates))
	writeSegment(t, dir, base, nil, nil, 0)
	tp, ok := kafkalog.ParsePartitionDir(filepath.Base(dir))
	if !ok {
		t.Fatalf("%s is no partition dir", dir)
	}
	if err := checkpoint.Update(filepath.Join(filepath.Dir(dir), checkpoint.CleanerOffsetFile), tp, base); err != nil {
		t.Fatal(err)
	}
}

// updates returns n updates cycling over keys, value naming the offset
// they will get from base.
func updates(base int64, n, keys int) []update {
	out := make([]update, n)
	for i := range out {
		k := fmt.Sprintf("key-%02d", (int(base)+i)%keys)
		out[i] = update{key: k, value: fmt.Sprintf("%s@%d", k, base+int64(i))}
	}
	return out
}

// remoteRead is what a reader finds in the remote tier.
type remoteRead struct {
	recs []batch.Record // data records, in offset order
	rows []remotelog.SegmentMetadata
}

// readRemote reads the records of the copies a reader sees
// (remotelog.Supersede over the finished rows, as fetch does), checking
// that offsets increase strictly and lie within their copy's range.
func readRemote(t *testing.T, r *rig) remoteRead {
	t.Helper()
	fin, err := r.store.FinishedSegments(r.tp)
	if err != nil {
		t.Fatal(err)
	}
	out := remoteRead{rows: remotelog.Supersede(fin)}
	prev := int64(-1)
	for _, m := range out.rows {
		rc, err := r.mgr.FetchLogSegment(context.Background(), m, 0, -1)
		if err != nil {
			t.Fatalf("read copy %s: %v", m.ID, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != m.SizeInBytes {
			t.Fatalf("copy %s holds %d bytes, its row says %d", m.ID, len(data), m.SizeInBytes)
		}
		for pos := 0; pos < len(data); {
			b, err := batch.ParseHeader(data[pos:], int64(pos))
			if err != nil {
				t.Fatalf("copy %s at %d: %v", m.ID, pos, err)
			}
			raw := data[pos : pos+int(b.Size)]
			pos += int(b.Size)
			if !batch.CheckCRC(raw) {
				t.Fatalf("copy %s: batch at offset %d has a bad CRC", m.ID, b.BaseOffset)
			}
			if b.BaseOffset < m.StartOffset || b.LastOffset > m.EndOffset || b.BaseOffset <= prev {
				t.Fatalf("copy %s [%d, %d]: batch [%d, %d] after offset %d", m.ID, m.StartOffset, m.EndOffset, b.BaseOffset, b.LastOffset, prev)
			}
			prev = b.LastOffset
			if b.Control {
				continue
			}
			recs, err := batch.Records(raw, codec.Kafka)
			if err != nil {
				t.Fatal(err)
			}
			out.recs = append(out.recs, recs...)
		}
	}
	return out
}

// latest is key -> latest value of what was read; tombstones delete.
func (rr remoteRead) latest() map[string]string {
	out := map[string]string{}
	for _, rec := range rr.recs {
		if rec.Value == nil {
			delete(out, string(rec.Key))
		} else {
			out[string(rec.Key)] = string(rec.Value)
		}
	}
	return out
}

// tombstones returns the keys of the tombstones read.
func (rr remoteRead) tombstones() []string {
	var out []string
	for _, rec := range rr.recs {
		if rec.Value == nil {
			out = append(out, string(rec.Key))
		}
	}
	return out
}

// compactedConfig is a copier config tiering topic "orders" as compacted,
// every copied segment leaving local disk, with the given remote
// compaction settings.
func compactedConfig(rc RemoteCompaction) Config {
	cfg := DefaultConfig()
	policy := "compact"
	cfg.Topics = map[string]topics.TopicConfig{"orders": {CleanupPolicy: &policy, Retention: topics.Retention{LocalRetentionMs: ptr(0)}}}
	cfg.RemoteCompaction = rc
	return cfg
}

// bucketsUnderTest returns the real buckets the remote compaction tests
// run on: a filesystem bucket and MinIO (skipped without a minio binary).
func bucketsUnderTest(t *testing.T) map[string]func(t *testing.T) rsm.Bucket {
	var (
		once sync.Once
		srv  *rsmtest.MinIOServer
		n    int
	)
	return map[string]func(t *testing.T) rsm.Bucket{
		"filesystem": func(t *testing.T) rsm.Bucket {
			b, err := filesystem.New(filesystem.Config{Dir: filepath.Join(t.TempDir(), "bucket")})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		"minio": func(st *testing.T) rsm.Bucket {
			once.Do(func() {
				if rsmtest.FindMinIO() != "" {
					srv = rsmtest.StartMinIO(t)
				}
			})
			if srv == nil {
				rsmtest.StartMinIO(st) // skips, or fails under CI, as every MinIO test does
			}
			n++
			name := fmt.Sprintf("compact%d", n)
			srv.CreateBucket(st, name)
			mc := minio.DefaultConfig()
			mc.Endpoint, mc.Bucket, mc.Insecure = srv.Endpoint, name, true
			b, err := minio.New(mc, nil)
			if err != nil {
				st.Fatal(err)
			}
			return b
		},
	}
}
