package rsmapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
	"github.com/tierd/tierd/rsm"
)

// testToken is the rig's token: every test checks it appears in no log
// line and no answer.
const testToken = "s3cr3t-t0ken-of-the-rsm-rig-0123456789"

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rig is an endpoint served on a real socket over fakes (or the given
// catalogue and storage), with a log dir of its own.
type rig struct {
	t       *testing.T
	srv     *Server
	cat     Catalogue
	st      Storage
	mem     *memStorage   // st when it is one
	mcat    *memCatalogue // cat when it is one
	bucket  rsm.Bucket    // the bucket under st, when it is a real one
	cfg     Config
	logDir  string
	url     string
	logs    *syncBuffer
	reg     *prometheus.Registry
	answers *syncBuffer // every answer body read through the rig
	client  *http.Client
	stop    func()
}

type rigOption func(*rig, *Config, *[]Option)

func withConfig(fn func(*Config)) rigOption {
	return func(_ *rig, c *Config, _ *[]Option) { fn(c) }
}

func withOptions(o ...Option) rigOption {
	return func(_ *rig, _ *Config, opts *[]Option) { *opts = append(*opts, o...) }
}

func withBackends(cat Catalogue, st Storage) rigOption {
	return func(r *rig, _ *Config, _ *[]Option) { r.cat, r.st = cat, st }
}

func newRig(t *testing.T, ro ...rigOption) *rig {
	t.Helper()
	root := t.TempDir()
	r := &rig{t: t, logDir: filepath.Join(root, "logs"), logs: &syncBuffer{}, answers: &syncBuffer{}, reg: prometheus.NewRegistry()}
	if err := os.MkdirAll(r.logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(root, "token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Enabled, cfg.TokenFile, cfg.LogDirs, cfg.StagingDir = true, tokenFile, []string{r.logDir}, filepath.Join(root, "staging")
	opts := []Option{WithLogger(slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		WithRegisterer(r.reg), WithInspector(testInspector()), func(s *Server) { s.janitorOff = true }}
	for _, o := range ro {
		o(r, &cfg, &opts)
	}
	if r.cat == nil {
		r.mcat = newMemCatalogue()
		r.cat = r.mcat
	}
	if r.st == nil {
		r.mem = newMemStorage("p/" + cfg.Prefix)
		r.st = r.mem
	}
	r.cfg = cfg
	srv, err := New(cfg, r.cat, r.st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.url = "http://" + lis.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	r.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		r.stop()
		for where, text := range map[string]string{"log": r.logs.String(), "answers": r.answers.String()} {
			if strings.Contains(text, testToken) {
				t.Errorf("the token appears in the %s", where)
			}
		}
	})
	return r
}

// testInspector is the check the rig uses: the real one (package
// segcheck), pure and fast.
func testInspector() Inspector { return Inspect }

// keys lists every object under the rig's storage.
func (r *rig) keys() []string {
	r.t.Helper()
	if r.mem != nil {
		return r.mem.keys()
	}
	var out []string
	if err := r.bucket.Iter(context.Background(), "", func(k string) error { out = append(out, k); return nil }); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// row returns the catalogue's row of a copy.
func (r *rig) row(c copyName) (remotelog.SegmentMetadata, bool) {
	row, err := r.cat.BrokerCopy(c.tp, c.start, c.id)
	return row, err == nil
}

// answer is one response, its body read whole.
type answer struct {
	code int
	h    http.Header
	body []byte
}

func (a answer) reason() string {
	var e errorBody
	json.Unmarshal(a.body, &e)
	return e.Reason
}

// do sends one request with the rig's token (token "" sends none; "-"
// the rig's).
func (r *rig) do(method, path string, body io.Reader, token string, hdr ...string) answer {
	r.t.Helper()
	a, err := r.try(context.Background(), method, path, body, token, hdr...)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	return a
}

func (r *rig) try(ctx context.Context, method, path string, body io.Reader, token string, hdr ...string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.url+path, body)
	if err != nil {
		return answer{}, err
	}
	if token == "-" {
		token = testToken
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r.answers.Write(b)
	return answer{code: resp.StatusCode, h: resp.Header, body: b}, err
}

// seg is one segment laid out in the rig's log dir, with the body of its
// copy request.
type seg struct {
	name       copyName
	dir        string
	log, index []byte
	timeIndex  []byte
	snapshot   []byte
	snapPath   string
	checkpoint []byte
	end        int64
	req        map[string]any
}

func (s *seg) path() string {
	return fmt.Sprintf("/v1/segments/%s/%d/%d/%s", s.name.tp.Topic, s.name.tp.Partition, s.name.start, s.name.id)
}

func (s *seg) file(suffix string) string {
	return filepath.Join(s.dir, kafkalog.FileName(s.name.start, suffix))
}

// body is the JSON of a copy by path.
func (s *seg) body() io.Reader {
	b, _ := json.Marshal(s.req)
	return bytes.NewReader(b)
}

// fixtureSeg describes one real broker segment of the fixtures: its
// partition directory, and its end offset.
type fixtureSeg struct {
	dir string // under the fixtures' root
	end int64
}

var (
	// 11 v2 batches of 11 records (Kafka 0.11), a 1-entry time index,
	// an empty offset index, a producer snapshot at 11.
	fixSmall = fixtureSeg{"sharaweil-kafka0110/data/test0-0", 10}
	// 13 batches (Kafka 3.7), a 2-entry offset index, a 3-entry time
	// index, a producer snapshot at 13.
	fixOffsets = fixtureSeg{"ldi-kafka370-kraft/__consumer_offsets-6", 12}
	// 28,068 batches, 2 MB (no index files in the fixture).
	fixLarge = fixtureSeg{"iechenyb-2019-plain/kafka-logs/string-key-0", 28161}
)

// layout copies a fixture segment's files into the rig's log dir as
// partition tp (the broker's bytes; the directory name is the test's)
// and returns it with a copy request naming a new segment id.
func (r *rig) layout(fx fixtureSeg, tp remotelog.TopicPartition) *seg {
	r.t.Helper()
	src := testfixtures.Path(r.t, fx.dir)
	s := &seg{name: copyName{tp: tp, start: 0, id: remotelog.NewSegmentID()}, dir: filepath.Join(r.logDir, tp.String()), end: fx.end}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return nil
		}
		return b
	}
	s.log = read(kafkalog.FileName(0, kafkalog.LogSuffix))
	s.index = read(kafkalog.FileName(0, kafkalog.IndexSuffix))
	s.timeIndex = read(kafkalog.FileName(0, kafkalog.TimeIndexSuffix))
	if s.index == nil {
		s.index = []byte{}
	}
	if s.timeIndex == nil {
		s.timeIndex = []byte{}
	}
	s.checkpoint = read("leader-epoch-checkpoint")
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		if f, ok := kafkalog.ParseFileName(e.Name()); ok && f.Suffix == kafkalog.SnapshotSuffix {
			s.snapshot, s.snapPath = read(e.Name()), filepath.Join(s.dir, e.Name())
		}
	}
	for path, data := range map[string][]byte{s.file(kafkalog.LogSuffix): s.log, s.file(kafkalog.IndexSuffix): s.index,
		s.file(kafkalog.TimeIndexSuffix): s.timeIndex} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	if s.snapPath != "" {
		if err := os.WriteFile(s.snapPath, s.snapshot, 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	s.req = map[string]any{
		"topicId": "B3_HiNPgSQ6oxG9ZZ6ED5A", "endOffset": s.end, "maxTimestampMs": 1700000000205, "eventTimestampMs": 1700000001000,
		"brokerId": 1, "segmentSizeInBytes": len(s.log), "segmentLeaderEpochs": []map[string]int64{{"epoch": 0, "startOffset": 0}},
		"logSegment": s.file(kafkalog.LogSuffix), "offsetIndex": s.file(kafkalog.IndexSuffix), "timeIndex": s.file(kafkalog.TimeIndexSuffix),
		"transactionIndex": nil, "producerSnapshot": nil, "leaderEpochCheckpoint": base64.StdEncoding.EncodeToString(s.checkpoint),
	}
	if s.snapPath != "" {
		s.req["producerSnapshot"] = s.snapPath
	}
	return s
}

// uploadBody is the body of a copy by upload of s; sizes, when given,
// replace the sizes announced (to lie about them).
func (s *seg) uploadBody(sizes ...int64) []byte {
	q := map[string]any{}
	for k, v := range s.req {
		q[k] = v
	}
	for _, k := range []string{"logSegment", "offsetIndex", "timeIndex", "transactionIndex", "producerSnapshot"} {
		delete(q, k)
	}
	files := [][]byte{s.log, s.index, s.timeIndex}
	names := []string{"logSegmentBytes", "offsetIndexBytes", "timeIndexBytes"}
	if s.snapPath != "" {
		files, names = append(files, s.snapshot), append(names, "producerSnapshotBytes")
	}
	for i, n := range names {
		q[n] = len(files[i])
		if i < len(sizes) {
			q[n] = sizes[i]
		}
	}
	head, _ := json.Marshal(q)
	var buf bytes.Buffer
	binary.Write(&buf, binary.BigEndian, uint32(len(head)))
	buf.Write(head)
	for _, f := range files {
		buf.Write(f)
	}
	return buf.Bytes()
}

// copy copies s by path and fails the test unless it succeeds.
func (r *rig) copy(s *seg) answer {
	r.t.Helper()
	a := r.do(http.MethodPut, s.path(), s.body(), "-", "Content-Type", "application/json")
	if a.code != http.StatusOK {
		r.t.Fatalf("copy of %s: %d %s", s.name, a.code, a.body)
	}
	return a
}

// counter returns a counter's value with the given labels.
func (r *rig) counter(name string, labels ...string) float64 {
	r.t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
		}
	}
	return 0
}
