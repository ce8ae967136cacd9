package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/seglog"
)

// sample is one random read: its offset and the bytes a Fetch of it
// answers (segment index, file position, length), from the local files.
type sample struct {
	offset   int64
	seg      int
	pos, len int64
	next     int64
}

// samples picks cfg.Count offsets at random over the tiered log.
func (e *env) samples() []sample {
	rng := rand.New(rand.NewPCG(e.cfg.Seed, 0x7e1d))
	first, last := e.fin[0].StartOffset, e.fin[len(e.fin)-1].EndOffset
	out := make([]sample, 0, e.cfg.Count)
	for len(out) < e.cfg.Count {
		out = append(out, e.expect(first+rng.Int64N(last-first+1)))
	}
	return out
}

// expect is the answer Fetch gives for offset: whole batches of one
// segment from the one holding offset, within max_bytes (the first always).
func (e *env) expect(offset int64) sample {
	seg := sort.Search(len(e.fin), func(i int) bool { return e.fin[i].EndOffset >= offset })
	bs := e.batches[seg]
	i := sort.Search(len(bs), func(i int) bool { return bs[i].LastOffset >= offset })
	s := sample{offset: offset, seg: seg, pos: bs[i].Position}
	end := bs[i].End()
	s.next = bs[i].LastOffset + 1
	for j := i + 1; j < len(bs) && bs[j].End()-s.pos <= int64(e.cfg.MaxBytes); j++ {
		end, s.next = bs[j].End(), bs[j].LastOffset+1
	}
	s.len = end - s.pos
	return s
}

func (e *env) fetchReq(s sample) *tierdpb.FetchRequest {
	return &tierdpb.FetchRequest{Topic: topic, Offset: s.offset, MaxBytes: e.cfg.MaxBytes}
}

// localBytes returns the sample's bytes of the local segment file (its
// read-only mapping; buf is unused).
func (e *env) localBytes(s sample, _ []byte) ([]byte, error) {
	m := e.maps[s.seg]
	if s.pos+s.len > int64(len(m)) {
		return nil, fmt.Errorf("offset %d: bytes %d-%d past the local segment's %d", s.offset, s.pos, s.pos+s.len, len(m))
	}
	return m[s.pos : s.pos+s.len], nil
}

// checkLocal compares a fetch's answer (its records and the offset after
// them) with the local file's bytes.
func (e *env) checkLocal(name string, s sample, records []byte, next int64, buf []byte) error {
	want, err := e.localBytes(s, buf)
	if err != nil {
		return err
	}
	return check(name, s, records, next, want)
}

// check compares a fetch's answer (its records and the offset after them)
// with the expected bytes; want nil checks the size and next offset only.
func check(name string, s sample, records []byte, next int64, want []byte) error {
	if int64(len(records)) != s.len || next != s.next || (want != nil && !bytes.Equal(records, want)) {
		return fmt.Errorf("%s of offset %d: %d bytes up to %d, want %d bytes up to %d", name, s.offset, len(records), next, s.len, s.next)
	}
	return nil
}

// rawGet reads the sample's bytes with one ranged GET through the same
// bucket client tierd uses.
func (e *env) rawGet(ctx context.Context, s sample, buf []byte) ([]byte, error) {
	rc, err := e.mgr.FetchLogSegment(ctx, e.fin[s.seg], s.pos, s.pos+s.len)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf = buf[:s.len]
	_, err = io.ReadFull(rc, buf)
	return buf, err
}

// coldAndRaw measures raw_get, fetch_cold, fetch_cold_stream and
// kafka_fetch_cold on the same samples, in turn (which goes first
// rotates), with the chunk cache
// emptied before every cold fetch; the remote indexes stay cached, as they
// do for a partition being read. fetch_cold_all then reads a third of the
// samples again with the index cache emptied too.
func (e *env) coldAndRaw(ctx context.Context, ss []sample) (raw, cold, scold, kcold, coldAll *Result, err error) {
	raw, cold, scold, kcold, coldAll = newResult("raw_get"), newResult("fetch_cold"), newResult("fetch_cold_stream"), newResult("kafka_fetch_cold"), newResult("fetch_cold_all")
	defer e.profile("cold")()
	defer e.trace("cold")()
	for _, m := range e.fin { // load every offset index
		if _, err := fetchRetry(ctx, e.client, &tierdpb.FetchRequest{Topic: topic, Offset: m.StartOffset, MaxBytes: 1}, cold); err != nil {
			return nil, nil, nil, nil, nil, fmt.Errorf("loading the offset indexes: %w", err)
		}
	}
	kc, err := e.dialKafka(ctx)
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	defer kc.close()
	rawBuf, buf := make([]byte, int(e.cfg.MaxBytes)+1<<20), make([]byte, int(e.cfg.MaxBytes)+1<<20)
	for i, s := range ss {
		var want []byte
		doRaw := func() error {
			t := time.Now()
			v, err := e.rawGet(ctx, s, rawBuf)
			raw.add(time.Since(t), s.len)
			want = v
			return err
		}
		doCold := func() error {
			return e.coldOne(cold, s, want, buf, func() ([]byte, int64, error) {
				resp, err := e.client.API().Fetch(ctx, e.fetchReq(s))
				return resp.GetRecords(), resp.GetNextOffset(), err
			})
		}
		doStream := func() error { // tierd's own client: FetchStream, as the embedded log reads
			return e.coldOne(scold, s, want, buf, func() ([]byte, int64, error) {
				b, err := e.client.Partition(topic, 0).Fetch(ctx, s.offset, int(e.cfg.MaxBytes), tierdpb.IsolationLevel_READ_UNCOMMITTED)
				if err != nil {
					return nil, 0, err
				}
				return b.Records, b.NextOffset, nil
			})
		}
		doKafka := func() error {
			return e.coldOne(kcold, s, want, buf, func() ([]byte, int64, error) { return kc.fetch(ctx, s.offset) })
		}
		ops := []func() error{doRaw, doCold, doStream, doKafka}
		for k := range ops {
			if err := ops[(i+k)%len(ops)](); err != nil {
				return nil, nil, nil, nil, nil, err
			}
		}
	}
	for i, s := range ss { // a third of the samples again, indexes dropped too
		if i%3 != 0 {
			continue
		}
		e.server.Engine().DropCaches(true)
		bl, bi := e.getsBy()
		t := time.Now()
		resp, err := e.client.API().Fetch(ctx, e.fetchReq(s))
		coldAll.add(time.Since(t), s.len)
		if err != nil {
			return nil, nil, nil, nil, nil, fmt.Errorf("%s: %w", coldAll.Name, err)
		}
		e.server.Engine().Settle()
		al, ai := e.getsBy()
		coldAll.gets += al - bl
		coldAll.indexGets += ai - bi
		if err := e.checkLocal(coldAll.Name, s, resp.Records, resp.NextOffset, buf); err != nil {
			return nil, nil, nil, nil, nil, err
		}
	}
	for _, r := range []*Result{cold, scold, kcold, coldAll} {
		n := float64(r.hist.TotalCount())
		r.Note = fmt.Sprintf("%.2f GETs per fetch (%.2f of .log, %.2f of indexes)", (r.gets+r.indexGets)/n, r.gets/n, r.indexGets/n)
	}
	return raw, cold, scold, kcold, coldAll, nil
}

// coldOne measures one fetch of s (fetch returns its records and the
// offset after them) with the chunk cache emptied first, counts the GETs
// it made, and checks its answer against want (the raw GET's bytes when
// that ran first) and the local file.
func (e *env) coldOne(r *Result, s sample, want, buf []byte, fetch func() ([]byte, int64, error)) error {
	e.server.Engine().DropCaches(false)
	bl, bi := e.getsBy()
	t := time.Now()
	records, next, err := fetch()
	r.add(time.Since(t), s.len)
	e.server.Engine().Settle()
	al, ai := e.getsBy()
	r.gets += al - bl
	r.indexGets += ai - bi
	if err != nil {
		return fmt.Errorf("%s: %w", r.Name, err)
	}
	if err := check(r.Name, s, records, next, want); err != nil { // the bucket's bytes
		return err
	}
	return e.checkLocal(r.Name, s, records, next, buf) // and the local file's
}

// warmAndFloor measures fetch_warm and grpc_floor on the same samples,
// taking turns per sample (which goes first alternates), so that both see
// the same stretch of time on a shared machine. The samples go in groups
// (warmGroups) that the chunk cache holds whole: for each, the cache is
// emptied (indexes kept), each offset fetched once unmeasured (asked
// again on UNAVAILABLE, as a consumer would), then the group fetched
// again, each warm Fetch beside a floor RPC of the same size. The GETs
// tierd makes while the group is timed are counted (WarmGets): 0 means
// every timed fetch was served from the cache.
func (e *env) warmAndFloor(ctx context.Context, ss []sample) (warm, floor *Result, err error) {
	warm, floor = newResult("fetch_warm"), newResult("grpc_floor")
	defer e.profile("warm")()
	buf := make([]byte, int(e.cfg.MaxBytes)+1<<20)
	groups := e.warmGroups(ss)
	var gets float64
	i := 0
	for _, g := range groups {
		e.server.Engine().DropCaches(false)
		for _, s := range g {
			if _, err := fetchRetry(ctx, e.client, e.fetchReq(s), warm); err != nil {
				return nil, nil, fmt.Errorf("%s: pre-fetch: %w", warm.Name, err)
			}
		}
		e.server.Engine().Settle()
		before := e.gets()
		for _, s := range g {
			doWarm := func() error {
				t := time.Now()
				resp, err := e.client.API().Fetch(ctx, e.fetchReq(s))
				warm.add(time.Since(t), s.len)
				if err != nil {
					return fmt.Errorf("%s: %w", warm.Name, err)
				}
				return e.checkLocal(warm.Name, s, resp.Records, resp.NextOffset, buf)
			}
			doFloor := func() error { return e.floorOne(ctx, floor, s) }
			ops := []func() error{doWarm, doFloor}
			for k := range ops {
				if err := ops[(i+k)%len(ops)](); err != nil {
					return nil, nil, err
				}
			}
			i++
		}
		e.server.Engine().Settle()
		gets += e.gets() - before
	}
	warm.WarmGets = &gets
	warm.Note = fmt.Sprintf("%d GETs while timed (0: every timed fetch was served from the cache); %d groups of offsets, each pre-fetched into an emptied cache", int(gets), len(groups))
	return warm, floor, nil
}

// warmGroups splits the samples, in order, into groups the chunk cache
// can hold at once: no two samples of a group touch the same chunk (the
// memory tier keeps one part of a chunk, so a second read elsewhere in it
// would replace the first one's part or not be kept), and a group's
// loads, each at most the sample's index interval plus max_bytes (fetch
// pins the bytes up to the next offset index entry + max_bytes) or a
// quarter chunk, fit in half the memory budget (the bytes before the
// sample's, from the index entry the read starts at, are counted too). A sample that does not
// fit the group being built waits for a later one.
func (e *env) warmGroups(ss []sample) [][]sample {
	cb := e.cfg.ChunkBytes
	per := int64(e.cfg.MaxBytes) + max(cb/4, 1<<20) // bytes a pre-fetch loads, at most
	budget := max(e.cfg.CacheMemoryBytes/2, per)
	type chunk struct {
		seg int
		i   int64
	}
	var groups [][]sample
	rest := ss
	for len(rest) > 0 {
		var g, later []sample
		used := map[chunk]bool{}
		var bytes int64
		for _, s := range rest {
			// The fetch reads from the offset index entry at or below the
			// offset, some batches before s.pos, and loads up to the next
			// entry + max_bytes: margins of 1 MiB on both sides.
			first, last := max(s.pos-1<<20, 0)/cb, (s.pos+int64(e.cfg.MaxBytes)+1<<20)/cb
			free := bytes+per <= budget
			for i := first; free && i <= last; i++ {
				free = !used[chunk{s.seg, i}]
			}
			if !free {
				later = append(later, s)
				continue
			}
			for i := first; i <= last; i++ {
				used[chunk{s.seg, i}] = true
			}
			bytes += per
			g = append(g, s)
		}
		groups = append(groups, g)
		rest = later
	}
	return groups
}

// local reads the same offsets from the local segment files with the
// embedded segment log.
func (e *env) local(ss []sample) (*Result, error) {
	l, err := seglog.Open(e.partDir, seglog.DefaultConfig())
	if err != nil {
		return nil, err
	}
	defer l.Close()
	r := newResult("local_read")
	for _, s := range ss {
		t := time.Now()
		data, err := l.Read(s.offset, int(e.cfg.MaxBytes))
		r.add(time.Since(t), s.len)
		if err != nil {
			return nil, err
		}
		if int64(len(data)) != s.len {
			return nil, fmt.Errorf("local_read of offset %d: %d bytes, want %d", s.offset, len(data), s.len)
		}
	}
	return r, nil
}

// floorOne sends one RPC answering the sample's number of bytes from
// memory over the same transport.
func (e *env) floorOne(ctx context.Context, r *Result, s sample) error {
	t := time.Now()
	resp, err := e.floor.API().Fetch(ctx, &tierdpb.FetchRequest{Topic: topic, Offset: s.offset, MaxBytes: int32(s.len)})
	r.add(time.Since(t), s.len)
	if err != nil {
		return fmt.Errorf("%s: %w", r.Name, err)
	}
	if int64(len(resp.Records)) != s.len {
		return fmt.Errorf("%s: %d bytes, want %d", r.Name, len(resp.Records), s.len)
	}
	return nil
}
