package rsmapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// realEnv is real MinIO (reached through a fault proxy) and a real
// Pebble store.
type realEnv struct {
	srv    *rsmtest.MinIOServer
	proxy  *rsmtest.FaultProxy
	bucket rsm.Bucket
	mgr    *rsm.Manager
	store  *rlmm.Store
	direct *miniogo.Core
}

const realBucket = "rsm"

func startReal(t *testing.T) *realEnv {
	t.Helper()
	e := &realEnv{srv: rsmtest.StartMinIO(t)}
	e.proxy = rsmtest.StartFaultProxy(t, e.srv.Endpoint)
	e.srv.CreateBucket(t, realBucket)
	cfg := minio.DefaultConfig()
	cfg.Endpoint, cfg.Bucket, cfg.Insecure, cfg.PartSize, cfg.PartConcurrency, cfg.MaxRetries = e.proxy.Endpoint, realBucket, true, 5<<20, 1, 1
	b, err := minio.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	e.bucket = b
	if e.mgr, err = rsm.NewManager(b, rsm.Config{Prefix: BrokerPrefix("p", DefaultPrefix)}); err != nil {
		t.Fatal(err)
	}
	e.openStore(t, filepath.Join(t.TempDir(), "meta"))
	if e.direct, err = miniogo.NewCore(e.srv.Endpoint, &miniogo.Options{Creds: credentials.NewStaticV4(rsmtest.AccessKey, rsmtest.SecretKey, "")}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *realEnv) openStore(t *testing.T, dir string) {
	t.Helper()
	s, err := rlmm.Open(rlmm.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e.store = s
}

// rig serves the endpoint over the real backends.
func (e *realEnv) rig(t *testing.T, ro ...rigOption) *rig {
	t.Helper()
	r := newRig(t, append([]rigOption{withBackends(e.store, NewStorage(e.mgr))}, ro...)...)
	r.bucket = e.bucket
	return r
}

// uploadsOf lists the incomplete multipart uploads MinIO has of exactly
// key (its listings by prefix miss uploads a restart cut off).
func (e *realEnv) uploadsOf(t *testing.T, key string) []string {
	t.Helper()
	res, err := e.direct.ListMultipartUploads(context.Background(), realBucket, key, "", "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, u := range res.Uploads {
		if u.Key == key {
			ids = append(ids, u.UploadID)
		}
	}
	return ids
}

// noUploadsOf fails the test when any object key of c has an incomplete
// upload.
func (e *realEnv) noUploadsOf(t *testing.T, c copyName) {
	t.Helper()
	for _, suffix := range []string{".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".leader-epoch-checkpoint", rsm.ManifestSuffix} {
		if ids := e.uploadsOf(t, e.mgr.Key(c.meta(), suffix)); len(ids) > 0 {
			t.Errorf("incomplete uploads of %s: %v", e.mgr.Key(c.meta(), suffix), ids)
		}
	}
}

func TestRealCopyReadDelete(t *testing.T) {
	e := startReal(t)
	r := e.rig(t)
	for i, fx := range []fixtureSeg{fixSmall, fixOffsets, fixLarge} {
		s := r.layout(fx, remotelog.TopicPartition{Topic: "orders", Partition: int32(i)})
		if i == 1 {
			if a := r.do(http.MethodPut, s.path(), bytes.NewReader(s.uploadBody()), "-", "Content-Type", UploadContentType); a.code != http.StatusOK {
				t.Fatalf("copy by upload of %s: %d %s", fx.dir, a.code, a.body)
			}
		} else {
			r.copy(s)
		}
		checkRoundTrip(t, r, s)
		mf, err := e.mgr.ReadManifest(context.Background(), e.mgr.Key(s.name.meta(), rsm.ManifestSuffix))
		if err != nil || !mf.BrokerOwned || mf.SizeInBytes != int64(len(s.log)) {
			t.Errorf("manifest of %s: %+v, %v; want brokerOwned and the .log's size", fx.dir, mf, err)
		}
		row, err := e.store.BrokerCopy(s.name.tp, 0, s.name.id)
		if err != nil || row.State != remotelog.CopySegmentFinished {
			t.Errorf("Pebble row of %s: %+v, %v", fx.dir, row, err)
		}
		for k := range 2 {
			if d := r.do(http.MethodDelete, s.path(), nil, "-"); d.code != http.StatusNoContent {
				t.Fatalf("DELETE %d of %s: %d %s", k, fx.dir, d.code, d.body)
			}
		}
		if a := r.do(http.MethodGet, s.path()+"/log", nil, "-", "Range", "bytes=0-"); a.code != http.StatusNotFound {
			t.Errorf("read after DELETE: %d", a.code)
		}
	}
	if keys := r.keys(); len(keys) != 0 {
		t.Errorf("objects left in MinIO: %v", keys)
	}
}

func TestRealRebuiltIndexes(t *testing.T) {
	e := startReal(t)
	r := e.rig(t)
	s := r.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	// An offset index whose first entry points into a batch, not at its
	// start: unusable.
	broken := append([]byte{}, s.index...)
	binary.BigEndian.PutUint32(broken[4:8], binary.BigEndian.Uint32(broken[4:8])+1)
	if err := os.WriteFile(s.file(kafkalog.IndexSuffix), broken, 0o644); err != nil {
		t.Fatal(err)
	}
	r.copy(s)
	got := r.do(http.MethodGet, s.path()+"/index/OFFSET", nil, "-")
	if got.code != http.StatusOK || bytes.Equal(got.body, broken) {
		t.Fatalf("OFFSET after a copy with a broken index: %d, %x; want the rebuilt index", got.code, got.body)
	}
	entries, err := index.ParseOffsetIndex(got.body, 0)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[int64]bool{}
	sc := batch.NewScanner(bytes.NewReader(s.log), int64(len(s.log)), batch.ScanOptions{})
	for sc.Next() {
		starts[sc.Batch().Position] = true
	}
	for _, en := range entries {
		if !starts[int64(en.Position)] {
			t.Errorf("rebuilt offset index entry %+v does not point at the start of a batch", en)
		}
	}
	if !strings.Contains(r.logs.String(), "check_failed") || r.counter("tierd_rsm_rebuilt_indexes_total") != 1 {
		t.Errorf("the rebuild is not logged with the check that failed, or not counted:\n%s", r.logs)
	}
}

func TestRealCorruptSegment(t *testing.T) {
	e := startReal(t)
	r := e.rig(t)
	s := r.layout(fixLarge, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	bad := append([]byte{}, s.log...)
	bad[1<<20] ^= 0x01
	os.WriteFile(s.file(kafkalog.LogSuffix), bad, 0o644)
	a := r.do(http.MethodPut, s.path(), s.body(), "-")
	if a.code != http.StatusUnprocessableEntity || a.reason() != "CORRUPT_SEGMENT" || !strings.Contains(string(a.body), "at byte ") {
		t.Fatalf("copy of a corrupt segment: %d %s; want 422 naming the byte", a.code, a.body)
	}
	nothingStored(t, r)
	e.noUploadsOf(t, s.name)
}

// bigSegment is a segment of reps times the real batches of fixLarge,
// each repetition's base offsets moved past the previous one's (the base
// offset is outside what a batch's CRC covers, so every batch stays
// valid): a .log larger than a multipart part.
func bigSegment(t *testing.T, reps int) (log []byte, end int64) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(testfixtures.Path(t, fixLarge.dir), kafkalog.FileName(0, kafkalog.LogSuffix)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	shift := fixLarge.end + 1
	for rep := range reps {
		sc := batch.NewScanner(bytes.NewReader(src), int64(len(src)), batch.ScanOptions{})
		for sc.Next() {
			raw, err := sc.Raw()
			if err != nil {
				t.Fatal(err)
			}
			b := append([]byte{}, raw...)
			binary.BigEndian.PutUint64(b[0:8], uint64(sc.Batch().BaseOffset+int64(rep)*shift))
			out.Write(b)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes(), int64(reps)*shift - 1
}

// TestRealStoreStoppedDuringCopy: MinIO stops while a copy's .log is
// going up in parts; the copy answers 503. After MinIO is back, the
// broker's DELETE of that attempt leaves nothing in the bucket, the
// cut-off upload included (found by its exact key).
func TestRealStoreStoppedDuringCopy(t *testing.T) {
	e := startReal(t)
	r := e.rig(t, withConfig(func(c *Config) { c.RequestTimeout = 5e9 }))
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	s.log, s.end = bigSegment(t, 6)
	s.index, s.timeIndex = []byte{}, []byte{}
	os.WriteFile(s.file(kafkalog.LogSuffix), s.log, 0o644)
	os.WriteFile(s.file(kafkalog.IndexSuffix), nil, 0o644)
	os.WriteFile(s.file(kafkalog.TimeIndexSuffix), nil, 0o644)
	s.req["endOffset"], s.req["segmentSizeInBytes"] = s.end, len(s.log)
	logKey := e.mgr.Key(s.name.meta(), kafkalog.LogSuffix)
	e.proxy.SetRule(func(req *http.Request) rsmtest.Fault {
		if req.Method == http.MethodPut && req.URL.Query().Get("partNumber") == "2" && strings.HasSuffix(req.URL.Path, "/"+logKey) {
			e.srv.Stop()
			return rsmtest.Reset
		}
		return rsmtest.Pass
	})
	a := r.do(http.MethodPut, s.path(), s.body(), "-")
	e.proxy.SetRule(nil)
	if a.code != http.StatusServiceUnavailable || a.reason() != "UNAVAILABLE" {
		t.Fatalf("copy while MinIO stops: %d %s; want 503 UNAVAILABLE", a.code, a.body)
	}
	e.srv.Restart(t)
	if ids := e.uploadsOf(t, logKey); len(ids) != 1 {
		t.Fatalf("the cut-off upload of the .log: %v; the test wants it left by the outage", ids)
	}
	if d := r.do(http.MethodDelete, s.path(), nil, "-"); d.code != http.StatusNoContent {
		t.Fatalf("the broker's DELETE of the attempt: %d %s", d.code, d.body)
	}
	if keys := r.keys(); len(keys) != 0 {
		t.Errorf("objects left: %v", keys)
	}
	e.noUploadsOf(t, s.name)
	if row, _ := r.row(s.name); row.State != remotelog.DeleteSegmentFinished {
		t.Errorf("row: %s, want DELETE_SEGMENT_FINISHED", row.State)
	}
}

// TestRealMetadataLost: the Pebble dir is lost; a new, empty one is
// rebuilt at start from the manifests under the prefix, and reads and
// deletes go on.
func TestRealMetadataLost(t *testing.T) {
	e := startReal(t)
	first := e.rig(t)
	a := first.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	b := first.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 1})
	first.copy(a)
	first.copy(b)
	first.stop()
	e.openStore(t, filepath.Join(t.TempDir(), "new-meta"))
	r := e.rig(t)
	checkRoundTrip(t, r, a) // from the manifest: no row yet
	r.srv.sweep(context.Background(), true)
	for _, s := range []*seg{a, b} {
		row, err := e.store.BrokerCopy(s.name.tp, 0, s.name.id)
		if err != nil || row.State != remotelog.CopySegmentFinished || row.SizeInBytes != int64(len(s.log)) {
			t.Errorf("rebuilt row of %s: %+v, %v", s.name, row, err)
		}
	}
	body, _ := json.Marshal(r.srv.Status())
	if st := r.srv.Status(); st.Stored != 2 {
		t.Errorf("status after the rebuild: %s", body)
	}
	if d := r.do(http.MethodDelete, b.path(), nil, "-"); d.code != http.StatusNoContent {
		t.Fatal(d.code)
	}
	checkRoundTrip(t, r, a)
}
