package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/chunked"
	"github.com/tierd/tierd/seglog"
)

// This file holds the objects case: the same segments stored as they
// came and in chunked form (zstd, AES-256-GCM, both) at several chunk
// sizes, in the run's bucket, each measured in the same rounds: stored
// over original bytes, CPU seconds per GiB to write (copy) and to read
// (a whole-copy replay) them, bench process and MinIO together, and the
// latency of cold reads of a Fetch's byte range (what a chunk cache miss
// asks of remote storage: rsm.Manager.FetchLogSegment of the range, the
// copy's manifest already read).

// objectsSegmentBytes is segment.bytes of the objects case's partitions.
const objectsSegmentBytes = 16 << 20

// objectsColdReads is how many cold range reads each variant makes per
// round.
const objectsColdReads = 60

// objectsReplays is how many times each round replays every copy, so
// that the CPU measured rests on 12x the partition's bytes.
const objectsReplays = 12

// objectsForm is one way of storing copies.
type objectsForm struct {
	name       string // "plain", "zstd", "aes", "zstd+aes"
	chunkBytes int    // 0 for plain
	compress   bool
	encrypt    bool
}

func (f objectsForm) variant(shape string) string {
	if f.chunkBytes == 0 {
		return shape + "/plain"
	}
	return fmt.Sprintf("%s/%s", shape, f.name)
}

// objectsForms are the forms measured: plain, and each transform at each
// chunk size of sizes (bytes).
func objectsForms(sizes []int) []objectsForm {
	out := []objectsForm{{name: "plain"}}
	for _, t := range []objectsForm{{name: "zstd", compress: true}, {name: "aes", encrypt: true}, {name: "zstd+aes", compress: true, encrypt: true}} {
		for _, cb := range sizes {
			f := t
			f.chunkBytes = cb
			out = append(out, f)
		}
	}
	return out
}

// objectsMetrics are the measures of each variant, by size (chunk KiB).
// fetch_store_cold_* are the cold Fetches made again over a store with
// Config.ObjectsStoreLatency (plain and the default chunk size only).
var objectsMetrics = []string{"stored_ratio", "write_cpu_s_per_gib", "read_cpu_s_per_gib", "fetch_cold_p50_ms", "fetch_cold_p99_ms",
	"fetch_store_cold_p50_ms", "fetch_store_cold_p99_ms", "cold_p50_ms", "cold_p99_ms"}

// objectsLatency is the latency of the objects case's second cold-Fetch
// run: ObjectsStoreLatency when the run's GETs have none of their own
// (StoreLatency 0), else 0 (the first run is judged).
func (c Config) objectsLatency() time.Duration {
	if c.StoreLatency > 0 {
		return 0
	}
	return c.ObjectsStoreLatency
}

// objectsSegment is one rolled segment of the case's partition.
type objectsSegment struct {
	files     rsm.SegmentFiles
	base, end int64
	data      []byte
	batches   []int64 // batch start positions
	ends      []int64 // batch end positions
	offsets   []int64 // batch base offsets
}

// objectsPartition writes the shape's records (codecShapeRecords,
// codecsBatch to a batch, uncompressed) into a new log of total bytes in
// objectsSegmentBytes segments under dir, and returns its segments.
func objectsPartition(dir, shape string, total int64, seed uint64) ([]objectsSegment, error) {
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = objectsSegmentBytes
	l, err := seglog.Open(dir, cfg)
	if err != nil {
		return nil, err
	}
	recs := codecShapeRecords(shape, int(total/(codecValueBytes+30)), seed, 1_700_000_000_000)
	for i := 0; i < len(recs); i += codecsBatch {
		if _, err := l.AppendBatch(batch.CodecNone, recs[i:min(i+codecsBatch, len(recs))]...); err != nil {
			l.Close()
			return nil, err
		}
	}
	infos := l.Segments()
	if err := l.Close(); err != nil {
		return nil, err
	}
	var out []objectsSegment
	for _, si := range infos {
		if si.Size == 0 {
			continue
		}
		p := func(suffix string) string { return filepath.Join(dir, kafkalog.FileName(si.BaseOffset, suffix)) }
		data, err := os.ReadFile(p(kafkalog.LogSuffix))
		if err != nil {
			return nil, err
		}
		s := objectsSegment{files: rsm.SegmentFiles{Log: p(kafkalog.LogSuffix), OffsetIndex: p(kafkalog.IndexSuffix), TimeIndex: p(kafkalog.TimeIndexSuffix)},
			base: si.BaseOffset, end: si.NextOffset - 1, data: data}
		for pos := int64(0); pos < int64(len(data)); {
			b, err := batch.ParseHeader(data[pos:], pos)
			if err != nil {
				return nil, err
			}
			s.batches, s.ends, s.offsets = append(s.batches, pos), append(s.ends, b.End()), append(s.offsets, b.BaseOffset)
			pos += int64(b.Size)
		}
		out = append(out, s)
	}
	return out, nil
}

// objectsStep is one variant's measures in one round.
type objectsStep struct {
	stored, original int64
	writeCPU         float64 // bench process + store, seconds
	readCPU          float64
	cold             []time.Duration // range reads through rsm
	fetch            []time.Duration // Fetches through tierd's fetch server
	fetchStore       []time.Duration // the same over a store with objectsLatency
}

// objectsRun copies segs in form f under prefix, replays every copy,
// makes the cold reads, checks every byte read against the local files,
// and deletes the copies.
func (e *env) objectsRun(ctx context.Context, f objectsForm, prefix, dir string, segs []objectsSegment, kr chunked.KeyWrapper, rng *mrand.Rand) (st objectsStep, err error) {
	cfg := rsm.Config{Prefix: prefix}
	if f.chunkBytes > 0 {
		cfg.Objects = chunked.DefaultConfig()
		cfg.Objects.ChunkBytes, cfg.Objects.Compression, cfg.Objects.Encryption = f.chunkBytes, f.compress, f.encrypt
		cfg.Keys = kr
	}
	var b rsm.Bucket = e.rec
	if e.cfg.StoreLatency > 0 {
		b = &slowBucket{Bucket: e.rec, delay: e.cfg.StoreLatency}
	}
	m, err := rsm.NewManager(b, cfg)
	if err != nil {
		return st, err
	}
	metas := make([]remotelog.SegmentMetadata, 0, len(segs))
	defer func() {
		for _, meta := range metas {
			if derr := m.DeleteSegment(context.WithoutCancel(ctx), meta); derr != nil && err == nil {
				err = derr
			}
		}
	}()
	c0 := e.cpu()
	for _, s := range segs {
		meta := remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "objects", Partition: 0}, ID: remotelog.NewSegmentID(),
			StartOffset: s.base, EndOffset: s.end, SizeInBytes: int64(len(s.data)), MaxTimestampMs: -1, State: remotelog.CopySegmentStarted, Form: m.NewCopyForm()}
		mf, err := m.CopySegment(ctx, meta, s.files)
		if err != nil {
			return st, err
		}
		metas = append(metas, mf.Metadata())
		st.stored += mf.Objects[kafkalog.LogSuffix].Size
		st.original += int64(len(s.data))
	}
	st.writeCPU = sampleTotal(e.cpu().sub(c0))
	c0 = e.cpu()
	for i := range len(metas) * objectsReplays {
		i %= len(metas)
		meta := metas[i]
		rc, err := m.FetchLogSegment(ctx, meta, 0, -1)
		if err != nil {
			return st, err
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return st, err
		}
		if !bytes.Equal(got, segs[i].data) {
			return st, fmt.Errorf("%s: copy of segment %d read back %d bytes that differ from the %d written", f.name, segs[i].base, len(got), len(segs[i].data))
		}
	}
	st.readCPU = sampleTotal(e.cpu().sub(c0)) / objectsReplays
	maxBytes := int64(e.cfg.MaxBytes)
	for range objectsColdReads {
		i := rng.IntN(len(segs))
		s := segs[i]
		start := s.batches[rng.IntN(len(s.batches))]
		end := min(start+maxBytes, int64(len(s.data)))
		t := time.Now()
		rc, err := m.FetchLogSegment(ctx, metas[i], start, end)
		if err != nil {
			return st, err
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		st.cold = append(st.cold, time.Since(t))
		if err != nil {
			return st, err
		}
		if !bytes.Equal(got, s.data[start:end]) {
			return st, fmt.Errorf("%s: bytes %d-%d of segment %d read back wrong", f.name, start, end, s.base)
		}
	}
	if st.fetch, err = e.objectsFetchCold(ctx, m, metas, segs, dir, rng); err != nil {
		return st, err
	}
	if lat := e.cfg.objectsLatency(); lat > 0 && (f.chunkBytes == 0 || f.chunkBytes == chunked.DefaultConfig().ChunkBytes) {
		// A Manager of its own over the slow store: its first reads of
		// each copy (manifest, indexes) wait too, before the timed ones.
		sm, err := rsm.NewManager(&slowBucket{Bucket: e.rec, delay: lat}, cfg)
		if err != nil {
			return st, err
		}
		st.fetchStore, err = e.objectsFetchCold(ctx, sm, metas, segs, dir+"-store", rng)
		return st, err
	}
	return st, nil
}

// sampleTotal is the bench process's and the store's CPU seconds together
// (the process's alone when the store's are unknown).
func sampleTotal(c cpuSample) float64 {
	if c.store < 0 {
		return c.proc
	}
	return c.proc + c.store
}

// quantile of ds (sorted in place), ms.
func quantileMs(ds []time.Duration, q float64) float64 {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	if len(ds) == 0 {
		return math.NaN()
	}
	return float64(ds[int(q*float64(len(ds)-1))]) / 1e6
}

// objectsCase runs the objects case: for each data shape (codecShapes),
// a partition of cfg.ObjectsBytes, then Rounds rounds in which every form
// (objectsForms, in an order rotated by the round) copies, replays and
// cold-reads it. Series are "objects/<shape>/<form> <metric>", sized by
// chunk KiB (0 for plain).
func (e *env) objectsCase(ctx context.Context) ([]*Series, error) {
	forms := objectsForms(e.cfg.ObjectsChunkSizes)
	kiB := make([]int, len(e.cfg.ObjectsChunkSizes))
	for i, cb := range e.cfg.ObjectsChunkSizes {
		kiB[i] = cb >> 10
	}
	key := make([]byte, 32)
	rand.Read(key)
	kr, err := chunked.NewKeyring(map[string][]byte{"bench": key}, "bench")
	if err != nil {
		return nil, err
	}
	ser := map[string]*Series{}
	var out []*Series
	for _, shape := range codecShapes {
		for _, f := range forms {
			sizes := kiB
			if f.chunkBytes == 0 {
				sizes = []int{0}
			}
			v := f.variant(shape)
			if ser[v+" "+objectsMetrics[0]] != nil {
				continue
			}
			for _, m := range objectsMetrics {
				ser[v+" "+m] = newSeries("objects", v, m, sizes, e.cfg.Rounds, false)
				ser[v+" "+m].SizeUnit = "KiB chunks"
				out = append(out, ser[v+" "+m])
			}
		}
	}
	sizeIndex := func(f objectsForm) int {
		for i, cb := range e.cfg.ObjectsChunkSizes {
			if cb == f.chunkBytes {
				return i
			}
		}
		return 0
	}
	rng := mrand.New(mrand.NewPCG(e.cfg.Seed, 0x0b1ec7))
	for _, shape := range codecShapes {
		dir := filepath.Join(e.dir, "objects-"+shape, "objects-0")
		segs, err := objectsPartition(dir, shape, e.cfg.ObjectsBytes, e.cfg.Seed)
		if err != nil {
			return nil, fmt.Errorf("objects/%s: %w", shape, err)
		}
		for r := range e.cfg.Rounds {
			for k := range forms {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				f := forms[(k+r)%len(forms)]
				prefix := fmt.Sprintf("%s/objects/%s-%s-%d-r%d", e.prefix, shape, f.name, f.chunkBytes, r)
				st, err := e.objectsRun(ctx, f, prefix, filepath.Join(e.dir, fmt.Sprintf("objects-fetch-%s-%s-%d-r%d", shape, f.name, f.chunkBytes, r)), segs, kr, rng)
				if err != nil {
					return nil, fmt.Errorf("objects/%s/%s (%d-byte chunks): %w", shape, f.name, f.chunkBytes, err)
				}
				gib := float64(st.original) / (1 << 30)
				v, i := f.variant(shape), sizeIndex(f)
				ser[v+" stored_ratio"].set(r, i, float64(st.stored)/float64(st.original))
				ser[v+" write_cpu_s_per_gib"].set(r, i, st.writeCPU/gib)
				ser[v+" read_cpu_s_per_gib"].set(r, i, st.readCPU/gib)
				ser[v+" cold_p50_ms"].set(r, i, quantileMs(st.cold, 0.5))
				ser[v+" cold_p99_ms"].set(r, i, quantileMs(st.cold, 0.99))
				ser[v+" fetch_cold_p50_ms"].set(r, i, quantileMs(st.fetch, 0.5))
				ser[v+" fetch_cold_p99_ms"].set(r, i, quantileMs(st.fetch, 0.99))
				store := ""
				if len(st.fetchStore) > 0 {
					ser[v+" fetch_store_cold_p50_ms"].set(r, i, quantileMs(st.fetchStore, 0.5))
					ser[v+" fetch_store_cold_p99_ms"].set(r, i, quantileMs(st.fetchStore, 0.99))
					store = fmt.Sprintf(" (%.2f ms with %s store latency)", quantileMs(st.fetchStore, 0.5), e.cfg.objectsLatency())
				}
				chunks := "stored as it came"
				if f.chunkBytes > 0 {
					chunks = fmt.Sprintf("%d KiB chunks", f.chunkBytes>>10)
				}
				e.logf("objects/%s/%s, %s (round %d): stored %.3f of %d MiB; write %.2f, read %.2f CPU-s/GiB; cold Fetch p50 %.2f ms%s, cold range p50 %.2f ms",
					shape, f.name, chunks, r+1, float64(st.stored)/float64(st.original), st.original>>20, st.writeCPU/gib, st.readCPU/gib,
					quantileMs(st.fetch, 0.5), store, quantileMs(st.cold, 0.5))
			}
		}
		os.RemoveAll(filepath.Dir(dir))
	}
	return out, nil
}

// objectsTargets checks, at the default chunk size, per shape: cold
// Fetches through the chunked forms within 1.1x the plain form's p50,
// and the encrypted (aes) replay within 1.25x the plain replay's
// CPU-s/GiB; medians over rounds, each round's chunked value over the
// same round's plain one. The cold Fetches are judged where a cold read
// waits for a store: over the run's --store-latency, or else the second
// run's ObjectsStoreLatency; the loopback ones are then shown beside
// (their ratio is the decoding's CPU, which the replay's target judges).
// With neither latency the loopback ones are judged.
func (rep *Report) objectsTargets() []Target {
	var out []Target
	def := chunked.DefaultConfig().ChunkBytes >> 10
	ratio := func(shape, form, metric string) (float64, float64, float64, bool) {
		c, p := rep.series("objects", shape+"/"+form, metric), rep.series("objects", shape+"/plain", metric)
		if c == nil || p == nil {
			return 0, 0, 0, false
		}
		i := -1
		for k, s := range c.Sizes {
			if s == def {
				i = k
			}
		}
		if i < 0 {
			return 0, 0, 0, false
		}
		var rs, cs, ps []float64
		for r := range c.Values {
			if cv, pv := c.Values[r][i], p.Values[r][0]; !math.IsNaN(cv) && !math.IsNaN(pv) && pv > 0 {
				rs, cs, ps = append(rs, cv/pv), append(cs, cv), append(ps, pv)
			}
		}
		rsp, ok := spreadOf(rs)
		csp, _ := spreadOf(cs)
		psp, _ := spreadOf(ps)
		return rsp.med, csp.med, psp.med, ok
	}
	for _, shape := range codecShapes {
		for _, form := range []string{"zstd", "aes", "zstd+aes"} {
			metric, where := "fetch_cold_p50_ms", "on loopback"
			switch {
			case rep.StoreLatency > 0:
				where = fmt.Sprintf("with %s store latency", rep.StoreLatency)
			case rep.ObjectsStoreLatency > 0:
				metric, where = "fetch_store_cold_p50_ms", fmt.Sprintf("with %s store latency", rep.ObjectsStoreLatency)
			}
			if q, c, p, ok := ratio(shape, form, metric); ok {
				out = append(out, Target{Text: fmt.Sprintf("objects cold Fetch p50 %s, %s/%s at %d KiB chunks, <= 1.1x plain: %.2f ms vs %.2f ms (%.2fx)", where, shape, form, def, c, p, q), Met: q <= 1.1})
			}
			if q, c, p, ok := ratio(shape, form, "fetch_cold_p50_ms"); ok && metric != "fetch_cold_p50_ms" {
				out = append(out, Target{Text: fmt.Sprintf("objects cold Fetch p50 on loopback, %s/%s at %d KiB chunks: %.2f ms vs %.2f ms plain (%.2fx)", shape, form, def, c, p, q), Info: true, Met: true})
			}
			if q, c, p, ok := ratio(shape, form, "cold_p50_ms"); ok {
				out = append(out, Target{Text: fmt.Sprintf("objects cold range read p50 (rsm alone), %s/%s at %d KiB chunks: %.2f ms vs %.2f ms plain (%.2fx)", shape, form, def, c, p, q), Info: true, Met: true})
			}
		}
		if q, c, p, ok := ratio(shape, "aes", "read_cpu_s_per_gib"); ok {
			out = append(out, Target{Text: fmt.Sprintf("objects encrypted replay CPU, %s/aes at %d KiB chunks, <= 1.25x plain: %.2f vs %.2f CPU-s/GiB (%.2fx)", shape, def, c, p, q), Met: q <= 1.25})
		}
		if q, c, p, ok := ratio(shape, "zstd+aes", "read_cpu_s_per_gib"); ok {
			out = append(out, Target{Text: fmt.Sprintf("objects compressed+encrypted replay CPU, %s at %d KiB chunks: %.2f vs %.2f CPU-s/GiB plain (%.2fx)", shape, def, c, p, q), Info: true, Met: true})
		}
	}
	return out
}
