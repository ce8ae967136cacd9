package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	"github.com/tierd/tierd/copier/topics"
	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
	"github.com/tierd/tierd/rsm/filesystem"
)

// fixtureSet is one log dir of the real fixtures (or of the derived
// cases), served by a tierd of its own: two log dirs may hold the same
// partition name.
type fixtureSet struct {
	name  string // the source log dir, relative to the fixture root
	src   string
	w     *kworld
	parts []*fpart
	dead  []string // topics only in non-live directories ("-delete"): never served
}

// fpart is one partition of a fixture log dir.
type fpart struct {
	tp      tpKey
	src     string   // the .log as the broker wrote it ("" when the directory has none)
	entries []fentry // the inspector's view of src: the batch scanner and batch.Records
	want    []batch.Record
	control bool   // src holds control batches
	layout  string // how the partition was laid out in the served log dir
	tiered  int64  // the offset before which everything went remote; -1 when nothing did
	hidden  bool   // KRaft's __cluster_metadata: never served by the Kafka listener
}

// fentry is one entry (v2 batch or legacy message) of a .log.
type fentry struct {
	b    batch.Batch
	raw  []byte
	recs []batch.Record
}

func (e fentry) first() int64 {
	if len(e.recs) > 0 {
		return e.recs[0].Offset
	}
	return e.b.BaseOffset
}

// last is the offset of the last data record, -1 when none.
func (p *fpart) last() int64 {
	if len(p.want) == 0 {
		return -1
	}
	return p.want[len(p.want)-1].Offset
}

// readEntries reads a .log with the batch scanner (CRC checked) and
// decodes every entry's records.
func readEntries(t *testing.T, path string) []fentry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []fentry
	s := batch.NewScanner(bytes.NewReader(data), int64(len(data)), batch.ScanOptions{VerifyCRC: true})
	for s.Next() {
		if !s.CRCValid() {
			t.Fatalf("%s: bad CRC at byte %d", path, s.Batch().Position)
		}
		raw, err := s.Raw()
		if err != nil {
			t.Fatal(err)
		}
		e := fentry{b: s.Batch(), raw: append([]byte(nil), raw...)}
		if err := e.b.InspectWrapper(e.raw, codec.Kafka); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if e.recs, err = batch.Records(e.raw, codec.Kafka); err != nil {
			t.Fatalf("%s: entry at byte %d: %v", path, e.b.Position, err)
		}
		out = append(out, e)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// loadFixtureSets finds every log dir under root (the parents of
// partition directories, live or not), sorted.
func loadFixtureSets(t *testing.T, root string) []*fixtureSet {
	t.Helper()
	dirs := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		_, live := kafkalog.ParsePartitionDir(d.Name())
		_, _, dead := kafkalog.ParseNonLivePartitionDir(d.Name())
		if (live || dead) && path != root && holdsPartition(path) {
			dirs[filepath.Dir(path)] = true
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var sets []*fixtureSet
	for d := range dirs {
		rel, _ := filepath.Rel(root, d)
		sets = append(sets, &fixtureSet{name: rel, src: d})
	}
	sort.Slice(sets, func(i, j int) bool { return sets[i].name < sets[j].name })
	return sets
}

// holdsPartition says whether dir has a partition's files: a log dir
// may be named like a partition ("kafka-573957").
func holdsPartition(dir string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if _, ok := kafkalog.ParseFileName(e.Name()); ok || e.Name() == "leader-epoch-checkpoint" || e.Name() == "partition.metadata" {
			return true
		}
	}
	return false
}

// build copies the set's partition directories into a fresh log dir and
// starts a tierd over it. Every other partition with data (counted by n
// across sets) is laid out for tiering: split at a batch boundary (at
// cuts[dir] when given, else in the middle) into a rolled segment, which
// the copier tiers and local retention then deletes, and the active rest;
// a one-batch partition is rolled with an empty active segment. The other
// partitions stay as the broker left them, indexes included. Kafka's
// internal topics are never tiered: theirs stay local in two segments.
func (s *fixtureSet) build(t *testing.T, n *int, cuts map[string]int) {
	t.Helper()
	logDir := t.TempDir()
	ents, err := os.ReadDir(s.src)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	var deadTopics []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		srcDir, dstDir := filepath.Join(s.src, e.Name()), filepath.Join(logDir, e.Name())
		tp, ok := kafkalog.ParsePartitionDir(e.Name())
		if !ok {
			if dtp, _, dead := kafkalog.ParseNonLivePartitionDir(e.Name()); dead {
				deadTopics = append(deadTopics, dtp.Topic)
				copyDir(t, srcDir, dstDir, nil)
			}
			continue
		}
		live[tp.Topic] = true
		p := &fpart{tp: tp, tiered: -1, layout: "as the broker left it", hidden: tp.Topic == "__cluster_metadata"}
		s.parts = append(s.parts, p)
		logs, _ := filepath.Glob(filepath.Join(srcDir, "*"+kafkalog.LogSuffix))
		if len(logs) > 1 {
			t.Fatalf("%s: %d .log files; the fixtures hold one per partition", srcDir, len(logs))
		}
		if len(logs) == 0 {
			p.layout = "no .log (indexes only)"
			copyDir(t, srcDir, dstDir, nil)
			continue
		}
		p.src = logs[0]
		p.entries = readEntries(t, p.src)
		for _, e := range p.entries {
			if e.b.Control {
				p.control = true
				continue
			}
			p.want = append(p.want, e.recs...)
		}
		cut, hasCut := cuts[srcDir]
		if len(p.entries) == 0 || (!hasCut && *n%2 == 1) {
			if len(p.entries) > 0 {
				*n++
			}
			if len(p.entries) == 0 {
				p.layout = "empty active segment"
			}
			copyDir(t, srcDir, dstDir, nil)
			continue
		}
		*n++
		if !hasCut {
			cut = max(len(p.entries)/2, 1)
		}
		p.layout, p.tiered = splitPartition(t, srcDir, dstDir, p.src, p.entries, cut)
		if strings.HasPrefix(tp.Topic, "__") {
			p.layout += " (internal topic: not tiered, both segments local)"
			p.tiered = -1
		}
	}
	for _, d := range deadTopics {
		if !live[d] {
			s.dead = append(s.dead, d)
		}
	}
	sort.Slice(s.parts, func(i, j int) bool { return s.parts[i].tp.String() < s.parts[j].tp.String() })
	b, err := filesystem.New(filesystem.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s.w = newKWorldOn(t, b, logDir)
	s.w.tier(topics.Retention{LocalRetentionMs: ptr(0)})
	for _, p := range s.parts {
		dir := filepath.Join(logDir, p.tp.String())
		if p.tiered < 0 {
			continue
		}
		o := s.w.offsets(p.tp.Topic, p.tp.Partition)
		if o.HighestTieredOffset != p.tiered-1 || o.LocalLogStartOffset != p.tiered || slices.Contains(localLogs(t, dir), 0) {
			t.Fatalf("%s %s: not tiered as laid out (%s): remote offsets %+v, local segments %v", s.name, p.tp, p.layout, o, localLogs(t, dir))
		}
	}
}

// splitPartition writes entries[:cut] as a rolled segment under the
// source's base offset and the rest as the active segment, named by its
// first offset (the offset after the cut when nothing follows), with the
// source directory's other files but its indexes (which describe the
// unsplit file; the copier builds them for the rolled segment, as Kafka
// would on recovery). It returns the layout and the active segment's base
// offset.
func splitPartition(t *testing.T, srcDir, dstDir, src string, entries []fentry, cut int) (string, int64) {
	t.Helper()
	f, ok := kafkalog.ParseFileName(filepath.Base(src))
	if !ok {
		t.Fatalf("%s: not a segment name", src)
	}
	next := entries[cut-1].b.LastOffset + 1
	if cut < len(entries) {
		next = entries[cut].first()
	}
	keepIndexes := cut == len(entries)
	copyDir(t, srcDir, dstDir, func(name string) bool {
		return strings.HasSuffix(name, kafkalog.LogSuffix) || (!keepIndexes && isIndex(name))
	})
	var older, newer []byte
	for i, e := range entries {
		if i < cut {
			older = append(older, e.raw...)
		} else {
			newer = append(newer, e.raw...)
		}
	}
	for name, data := range map[string][]byte{kafkalog.FileName(f.BaseOffset, kafkalog.LogSuffix): older, kafkalog.FileName(next, kafkalog.LogSuffix): newer} {
		if err := os.WriteFile(filepath.Join(dstDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if keepIndexes {
		return fmt.Sprintf("rolled (%d entries) with an empty active segment at %d", cut, next), next
	}
	return fmt.Sprintf("split after entry %d of %d: active segment from %d", cut, len(entries), next), next
}

// noTimestampV0 gives the records of magic-0 entries that librdkafka
// (kcat) reports with timestamp 0 the "no timestamp" -1 of the other
// clients and of the batch package: magic 0 has no timestamp field.
func noTimestampV0(got []crec, p *fpart) {
	v0 := map[int64]bool{}
	for _, e := range p.entries {
		for _, r := range e.recs {
			v0[r.Offset] = e.b.Magic == 0
		}
	}
	for i := range got {
		if v0[got[i].offset] && got[i].ts == 0 {
			got[i].ts = batch.NoTimestamp
		}
	}
}

// dumpEntry is one line of "tierd dump <file>.log".
type dumpEntry struct {
	BaseOffset, LastOffset       int64
	Count                        int
	Magic                        int8
	Codec, TimestampType         string
	Control, CrcValid            bool
	FirstTimestamp, MaxTimestamp int64
}

// dumpLog runs the built "tierd dump" on a .log.
func dumpLog(bin, path string) ([]dumpEntry, error) {
	cmd := exec.Command(bin, "dump", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("tierd dump: %w\n%s", err, stderr.String())
	}
	var d []dumpEntry
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var e dumpEntry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("tierd dump printed: %w", err)
		}
		d = append(d, e)
	}
	return d, nil
}

// checkDump compares tierd dump's view of each entry with the records
// the batch package decodes from it: offsets, count, magic, codec,
// control flag, CRC, and (CreateTime) the largest record timestamp.
func checkDump(d []dumpEntry, entries []fentry) error {
	if len(d) != len(entries) {
		return fmt.Errorf("tierd dump prints %d entries, the scanner finds %d", len(d), len(entries))
	}
	for i, e := range entries {
		de := d[i]
		if de.BaseOffset != e.first() || de.LastOffset != e.b.LastOffset || de.Count != len(e.recs) || de.Magic != e.b.Magic ||
			de.Codec != e.b.Codec.String() || de.Control != e.b.Control || !de.CrcValid {
			return fmt.Errorf("entry %d: dump %+v; scanner: first %d last %d, %d records, magic %d %s control %v",
				i, de, e.first(), e.b.LastOffset, len(e.recs), e.b.Magic, e.b.Codec, e.b.Control)
		}
		maxTS := batch.NoTimestamp
		for _, r := range e.recs {
			if r.Offset < de.BaseOffset || r.Offset > de.LastOffset {
				return fmt.Errorf("entry %d (%d-%d): record at offset %d", i, de.BaseOffset, de.LastOffset, r.Offset)
			}
			maxTS = max(maxTS, r.Timestamp)
		}
		if de.TimestampType == "CreateTime" && e.b.Magic > 0 && maxTS != de.MaxTimestamp {
			return fmt.Errorf("entry %d: dump max timestamp %d, records' %d", i, de.MaxTimestamp, maxTS)
		}
	}
	return nil
}

// TestKafkaFixturesThroughTierd: every log dir of the real fixtures (and
// the derived cases they lack: magic 0, compacted gaps), each served by a
// whole tierd with part of its partitions tiered, is read by kcat,
// franz-go, confluent-kafka and kafka-python record by record exactly as
// the batch scanner decodes the files, whose entries "tierd dump" prints
// alike; Metadata lists exactly the live partition directories.
func TestKafkaFixturesThroughTierd(t *testing.T) {
	t.Parallel()
	root := testfixtures.Dir(t)
	start := time.Now()
	bin := buildTierd(t)
	t.Logf("built tierd in %v", time.Since(start))
	sets := loadFixtureSets(t, root)
	derived, cuts := deriveFixtures(t, root)
	sets = append(sets, derived)
	n, records := 0, 0
	for _, s := range sets {
		s.build(t, &n, cuts)
		for _, p := range s.parts {
			records += len(p.want)
			t.Logf("%s %s: %d entries, %d records; %s", s.name, p.tp, len(p.entries), len(p.want), p.layout)
		}
	}
	t.Logf("%d log dirs, %d records, laid out and tiered in %v", len(sets), records, time.Since(start))

	t.Run("dump", func(t *testing.T) {
		var g errgroup.Group
		g.SetLimit(4)
		for _, s := range sets {
			for _, p := range s.parts {
				if p.src == "" {
					continue
				}
				g.Go(func() error {
					d, err := dumpLog(bin, p.src)
					if err == nil {
						err = checkDump(d, p.entries)
					}
					if err != nil {
						return fmt.Errorf("%s: %w", p.src, err)
					}
					return nil
				})
			}
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("metadata", func(t *testing.T) {
		for _, s := range sets {
			checkFixtureMetadata(t, s)
		}
	})
	t.Run("kcat", func(t *testing.T) {
		kcat := needKcat(t)
		var g errgroup.Group
		g.SetLimit(4)
		for _, s := range sets {
			for _, p := range s.parts {
				if p.hidden {
					continue // checkFixtureMetadata: not served
				}
				g.Go(func() error {
					got, err := kcatAll(kcat, s.w.addr, p.tp)
					if err == nil {
						noTimestampV0(got, p)
						err = sameRecords(got, p.want)
					}
					if err != nil {
						return fmt.Errorf("%s %s (%s): %w", s.name, p.tp, p.layout, err)
					}
					return nil
				})
			}
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("franz-go", func(t *testing.T) { readFixtures(t, sets, "", nil) })
	t.Run("confluent-kafka", func(t *testing.T) {
		needPython(t, "confluent_kafka")
		readFixtures(t, sets, "confluent-kafka", nil)
	})
	t.Run("kafka-python", func(t *testing.T) {
		needPython(t, "kafka")
		// kafka-python 2.0.2 hands control records to the application
		// as data: it reads the partitions without any.
		readFixtures(t, sets, "kafka-python", func(p *fpart) bool { return !p.control && len(p.want) < 5000 })
	})
	for _, s := range sets {
		if n := s.w.refused(); n != 0 {
			t.Errorf("%s: the listener refused %v requests of the clients", s.name, n)
		}
	}
}

// readFixtures reads every partition with data of every set with one
// client per set (franz-go when client is ""; a few sets at a time), with
// the filter when given, and compares the records.
func readFixtures(t *testing.T, sets []*fixtureSet, client string, filter func(*fpart) bool) {
	var g errgroup.Group
	g.SetLimit(3)
	for _, s := range sets {
		last := map[tpKey]int64{}
		want := map[tpKey]*fpart{}
		for _, p := range s.parts {
			if len(p.want) > 0 && !p.hidden && (filter == nil || filter(p)) {
				last[p.tp], want[p.tp] = p.last(), p
			}
		}
		if len(last) == 0 {
			continue
		}
		g.Go(func() error {
			var got map[tpKey][]crec
			var err error
			if client == "" {
				got, err = kgoRead(s.w.addr, last)
			} else {
				got, err = pythonRead(client, s.w.addr, "read_uncommitted", last)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			for tp, p := range want {
				if err := sameRecords(got[tp], p.want); err != nil {
					return fmt.Errorf("%s %s (%s): %w", s.name, tp, p.layout, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// checkFixtureMetadata: Metadata lists exactly the set's live topics, each
// held partition led by tierd (node 1) without error; topics only in
// "-delete" directories are not served, nor is KRaft's
// __cluster_metadata (UNKNOWN_TOPIC_OR_PARTITION when named).
func checkFixtureMetadata(t *testing.T, s *fixtureSet) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.w.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx)
	if err != nil {
		t.Fatalf("%s: metadata: %v", s.name, err)
	}
	var want []string
	for _, p := range s.parts {
		if p.hidden {
			if _, listed := md.Topics[p.tp.Topic]; listed {
				t.Errorf("%s: %s is listed; KRaft's metadata log is never served", s.name, p.tp)
			}
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(p.tp.Topic)}}
			if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Errorf("%s: Metadata naming %s: %v %+v, want UNKNOWN_TOPIC_OR_PARTITION", s.name, p.tp.Topic, err, resp)
			}
			continue
		}
		if !slices.Contains(want, p.tp.Topic) {
			want = append(want, p.tp.Topic)
		}
		pd, ok := md.Topics[p.tp.Topic].Partitions[p.tp.Partition]
		if !ok || pd.Err != nil || pd.Leader != 1 {
			t.Errorf("%s: %s: metadata %+v (listed %v)", s.name, p.tp, pd, ok)
		}
	}
	sort.Strings(want)
	if got := md.Topics.Names(); !slices.Equal(got, want) {
		t.Errorf("%s: metadata lists topics %v, want %v (not served: %v)", s.name, got, want, s.dead)
	}
}
