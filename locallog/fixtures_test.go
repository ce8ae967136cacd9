package locallog

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// fixtureDirs returns every directory of the real fixtures holding segment
// files (.log, indexes, snapshots).
func fixtureDirs(t *testing.T) []string {
	root := testfixtures.Dir(t)
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if _, ok := kafkalog.ParseFileName(d.Name()); ok && !d.IsDir() {
			seen[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	if len(dirs) < 20 {
		t.Fatalf("found %d fixture partition dirs under %s, want at least 20", len(dirs), root)
	}
	return dirs
}

// TestFixtures reads every real fixture set back, entry for entry and byte
// for byte, as batch's own scan of the files gives it: sequentially with
// several maxBytes, from every record offset (sampled on the large sets),
// by timestamp and max timestamp (against a brute-force search over the
// decoded records), and checks the offsets and the out-of-range answers.
func TestFixtures(t *testing.T) {
	root := testfixtures.Dir(t)
	for _, dir := range fixtureDirs(t) {
		rel, _ := filepath.Rel(root, dir)
		t.Run(rel, func(t *testing.T) {
			if _, ok := kafkalog.ParsePartitionDir(filepath.Base(dir)); !ok {
				if _, err := Open(dir, Options{}); err == nil {
					t.Fatalf("Open of %s (not a partition dir name) succeeded", dir)
				}
				return
			}
			checkFixture(t, dir)
		})
	}
}

// TestFixturesRolled reads every fixture set again with its segments
// rolled: a directory of symbolic links to the fixture files plus an empty
// active segment at the end, so that reads go through the broker's own
// .index and .timeindex files where the set has them.
func TestFixturesRolled(t *testing.T) {
	root := testfixtures.Dir(t)
	for _, dir := range fixtureDirs(t) {
		rel, _ := filepath.Rel(root, dir)
		if _, ok := kafkalog.ParsePartitionDir(filepath.Base(dir)); !ok {
			continue
		}
		ref := reference(t, dir)
		if len(ref) == 0 {
			continue
		}
		t.Run(rel, func(t *testing.T) {
			link := filepath.Join(t.TempDir(), filepath.Base(dir))
			if err := os.Mkdir(link, 0o755); err != nil {
				t.Fatal(err)
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(link, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
			next := ref[len(ref)-1].b.LastOffset + 1
			if err := os.WriteFile(filepath.Join(link, kafkalog.FileName(next, kafkalog.LogSuffix)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			checkFixture(t, link)
		})
	}
}

func checkFixture(t *testing.T, dir string) {
	ref := reference(t, dir)
	p := mustOpen(t, dir, Options{})
	var want Offsets
	if segs := p.cur.segs; len(segs) > 0 {
		want.LocalLogStartOffset = segs[0].base
		want.HighWatermark = segs[len(segs)-1].base
	}
	if n := len(ref); n > 0 && ref[n-1].seg == want.HighWatermark {
		want.HighWatermark = ref[n-1].b.LastOffset + 1
	}
	want.LastStableOffset = want.HighWatermark
	// Reads and timestamp searches first, before Offsets scans the rolled
	// segments: they go through the broker's indexes.
	recs := records(t, ref)
	step := max(1, len(recs)/2000)
	for i := 0; i < len(recs); i += step {
		r := recs[i]
		data, err := p.Read(r.offset, 1, want.HighWatermark)
		if err != nil {
			t.Fatalf("Read(%d): %v", r.offset, err)
		}
		equalBytes(t, "read at a record offset", data, ref[firstEntryFrom(ref, r.offset)].raw)
	}
	var rolled *segment
	if len(p.cur.segs) > 1 {
		rolled = p.cur.segs[0]
		if data, _ := os.ReadFile(segPath(dir, rolled.base, kafkalog.IndexSuffix)); len(data) > 0 && (!rolled.fileIdxSet || len(rolled.fileIdx) == 0) {
			t.Fatalf("the rolled segment's .index (%d bytes) was not used", len(data))
		}
		if rolled.cur.started {
			t.Fatal("the rolled segment was scanned by reads")
		}
	}
	checkOffsetForTimestamp(t, p, recs, want, 60)
	if rolled != nil {
		// A usable .timeindex spares the scan; without one the segment is
		// scanned once.
		data, _ := os.ReadFile(segPath(dir, rolled.base, kafkalog.TimeIndexSuffix))
		if usable := len(rolled.fileTidx) > 0; usable == rolled.cur.started || (len(data) > 0) != usable {
			t.Fatalf(".timeindex of %d bytes, %d entries used; segment scanned: %v", len(data), len(rolled.fileTidx), rolled.cur.started)
		}
	}
	o, err := p.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	if o != want {
		t.Fatalf("Offsets = %+v, want %+v", o, want)
	}
	if tp, _ := kafkalog.ParsePartitionDir(filepath.Base(dir)); p.TopicPartition() != tp || p.Dir() != dir {
		t.Fatalf("TopicPartition, Dir = %v, %s", p.TopicPartition(), p.Dir())
	}
	t.Logf("%d entries, offsets %+v", len(ref), o)
	small := 1 // one entry per read
	if len(ref) > 5000 {
		small = 1000 // a few per read: the per-offset reads above cover single entries
	}
	for _, mb := range []int{small, 4096, 1 << 20} {
		equalBytes(t, "sequential read", readAll(t, p, o.LocalLogStartOffset, mb), concat(ref))
	}
	checkOffsetForTimestamp(t, p, recs, o, 60)
	checkMaxTimestamp(t, p, recs, o)
	if data, err := p.Read(o.HighWatermark, 1<<20, o.HighWatermark); err != nil || len(data) != 0 {
		t.Fatalf("Read at the high watermark = %d bytes, %v; want none", len(data), err)
	}
	var oor *OffsetOutOfRangeError
	if _, err := p.Read(o.HighWatermark+1, 1, o.HighWatermark+5); !errors.As(err, &oor) {
		t.Fatalf("Read past the high watermark: %v, want *OffsetOutOfRangeError", err)
	}
	if o.LocalLogStartOffset > 0 {
		if _, err := p.Read(o.LocalLogStartOffset-1, 1, o.HighWatermark); !errors.Is(err, ErrBelowLocalStart) {
			t.Fatalf("Read below the local log start: %v", err)
		}
	}
	if a, err := p.AbortedTxns(o.LocalLogStartOffset, o.HighWatermark); err != nil || len(a) != 0 {
		t.Fatalf("AbortedTxns = %v, %v; the fixtures have no .txnindex", a, err)
	}
	wantID, werr := kafkalog.ReadTopicID(dir)
	if id, err := p.TopicID(); id != wantID || (err == nil) != (werr == nil) {
		t.Fatalf("TopicID = %q, %v; want %q, %v", id, err, wantID, werr)
	}
	wantEp, _ := epoch.ReadFile(epoch.Path(dir))
	if ep, err := p.LeaderEpochs(); err != nil || !reflect.DeepEqual(ep, wantEp) {
		t.Fatalf("LeaderEpochs = %v, %v; want %v", ep, err, wantEp)
	}
}

// checkOffsetForTimestamp compares OffsetForTimestamp with a brute-force
// search over the decoded records.
func checkOffsetForTimestamp(t *testing.T, p *Partition, recs []refRecord, o Offsets, targets int) {
	bruteFor := func(ts, from, limit int64) (int64, int64, bool) {
		for _, r := range recs {
			if r.offset >= from && r.offset < limit && r.ts >= ts {
				return r.offset, r.ts, true
			}
		}
		return 0, 0, false
	}
	var tss []int64
	step := max(1, len(recs)/targets)
	for i := 0; i < len(recs); i += step {
		tss = append(tss, recs[i].ts, recs[i].ts+1)
	}
	tss = append(tss, 0, 1<<62)
	froms := []int64{o.LocalLogStartOffset}
	if len(recs) > 2 {
		froms = append(froms, recs[len(recs)/2].offset)
	}
	for _, from := range froms {
		for _, ts := range tss {
			wo, wt, wf := bruteFor(ts, from, o.HighWatermark)
			go_, gt, gf, err := p.OffsetForTimestamp(ts, from, o.HighWatermark)
			if err != nil || gf != wf || (wf && (go_ != wo || gt != wt)) {
				t.Fatalf("OffsetForTimestamp(%d, from %d) = %d, %d, %v, %v; want %d, %d, %v", ts, from, go_, gt, gf, err, wo, wt, wf)
			}
		}
	}
}

// checkMaxTimestamp compares MaxTimestamp and MaxTimestampFrom with a
// brute-force search over the decoded records, for the whole log, for a
// limit inside it and for log starts inside it (inside an entry too).
func checkMaxTimestamp(t *testing.T, p *Partition, recs []refRecord, o Offsets) {
	froms := []int64{0}
	for _, i := range []int{1, len(recs) / 3, len(recs) / 2, len(recs) - 1} {
		if i > 0 && i < len(recs) {
			froms = append(froms, recs[i].offset)
		}
	}
	for _, from := range froms {
		for _, limit := range []int64{o.HighWatermark, (o.LocalLogStartOffset + o.HighWatermark) / 2} {
			wo, wt, wf := int64(0), int64(-1), false
			for _, r := range recs {
				if r.offset >= from && r.offset < limit && r.ts > wt {
					wo, wt, wf = r.offset, r.ts, r.ts >= 0
				}
			}
			go_, gt, gf, err := p.MaxTimestampFrom(from, limit)
			if err != nil || gf != wf || (wf && (go_ != wo || gt != wt)) {
				t.Fatalf("MaxTimestampFrom(%d, %d) = %d, %d, %v, %v; want %d, %d, %v", from, limit, go_, gt, gf, err, wo, wt, wf)
			}
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "orders-x"), Options{}); err == nil {
		t.Fatal("Open of a non-partition name succeeded")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "orders-3"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open of a missing dir: %v, want not exist", err)
	}
}
