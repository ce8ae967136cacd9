package rsm_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/chunked"
	"github.com/tierd/tierd/rsm/memory"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/rsmtest"
	"github.com/tierd/tierd/rsm/s3"
)

// fixtureLog is one live .log of the real fixtures with the files a copy
// takes beside it.
type fixtureLog struct {
	name  string // path under the fixture root
	base  int64
	files rsm.SegmentFiles
	data  []byte // the .log's bytes
}

// fixtureLogs lists every live .log of ../shared/fixtures/real; an index
// the broker did not leave is an empty file in a temp dir.
func fixtureLogs(t *testing.T) []fixtureLog {
	root := testfixtures.Dir(t)
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out []fixtureLog
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, ok := kafkalog.ParseFileName(d.Name())
		if !ok || !f.Live || f.Suffix != kafkalog.LogSuffix {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		beside := func(suffix string) string {
			q := filepath.Join(filepath.Dir(p), kafkalog.FileName(f.BaseOffset, suffix))
			if _, err := os.Stat(q); err != nil {
				return ""
			}
			return q
		}
		files := rsm.SegmentFiles{Log: p, OffsetIndex: beside(kafkalog.IndexSuffix), TimeIndex: beside(kafkalog.TimeIndexSuffix),
			TxnIndex: beside(kafkalog.TxnIndexSuffix)}
		if files.OffsetIndex == "" {
			files.OffsetIndex = empty
		}
		if files.TimeIndex == "" {
			files.TimeIndex = empty
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, fixtureLog{name: rel, base: f.BaseOffset, files: files, data: data})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	if len(out) < 20 {
		t.Fatalf("%d fixture segments, want the real set", len(out))
	}
	return out
}

// testKeyring returns a keyring of new random KEKs named ids, the last
// current.
func testKeyring(t *testing.T, ids ...string) (*chunked.Keyring, map[string][]byte) {
	keys := map[string][]byte{}
	for _, id := range ids {
		k := make([]byte, 32)
		rand.Read(k)
		keys[id] = k
	}
	kr, err := chunked.NewKeyring(keys, ids[len(ids)-1])
	if err != nil {
		t.Fatal(err)
	}
	return kr, keys
}

// chunkedForms are the object forms the round trips cover, beside the
// plain form, at the smallest chunk size so that the larger fixtures
// span many chunks.
func chunkedForms(t *testing.T) map[string]rsm.Config {
	kr, _ := testKeyring(t, "kek-1")
	out := map[string]rsm.Config{}
	for name, set := range map[string][2]bool{"zstd": {true, false}, "encrypted": {false, true}, "zstd+encrypted": {true, true}} {
		o := chunked.DefaultConfig()
		o.ChunkBytes, o.Compression, o.Encryption = 64<<10, set[0], set[1]
		cfg := rsm.Config{Prefix: "p", Objects: o}
		if set[1] {
			cfg.Keys = kr
		}
		out[name] = cfg
	}
	return out
}

// copyFixture copies fx under a new segment id in the form m writes.
func copyFixture(t *testing.T, m *rsm.Manager, fx fixtureLog) (remotelog.SegmentMetadata, *rsm.Manifest) {
	t.Helper()
	meta := remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "fixture", Partition: 0}, ID: remotelog.NewSegmentID(),
		StartOffset: fx.base, EndOffset: fx.base + 1000, SizeInBytes: int64(len(fx.data)), State: remotelog.CopySegmentStarted,
		TxnIndexPresent: fx.files.TxnIndex != "", Form: m.NewCopyForm()}
	mf, err := m.CopySegment(context.Background(), meta, fx.files)
	if err != nil {
		t.Fatalf("%s: copy: %v", fx.name, err)
	}
	return mf.Metadata(), mf
}

func readRange(m *rsm.Manager, meta remotelog.SegmentMetadata, start, end int64) ([]byte, error) {
	rc, err := m.FetchLogSegment(context.Background(), meta, start, end)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// checkReadsBack checks a copy against the plain copy of the same
// segment: every range of the .log, every index, VerifyCopy and
// DownloadCopy give the original bytes.
func checkReadsBack(t *testing.T, m, plain *rsm.Manager, meta, plainMeta remotelog.SegmentMetadata, fx fixtureLog) {
	t.Helper()
	ctx := context.Background()
	n := int64(len(fx.data))
	for _, r := range [][2]int64{{0, -1}, {0, n}, {0, 1}, {n / 3, 2 * n / 3}, {64<<10 - 1, 64<<10 + 1}, {n - 1, n}, {n / 2, n / 2}, {n + 5, -1}} {
		start, end := min(max(r[0], 0), n), r[1]
		if end > n {
			end = n
		}
		if end >= 0 && end < start {
			continue
		}
		want := fx.data[start:]
		if end >= 0 {
			want = fx.data[start:end]
		}
		got, err := readRange(m, meta, start, end)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: bytes [%d, %d): %d bytes, %v; want %d bytes", fx.name, start, end, len(got), err, len(want))
		}
	}
	for _, it := range []remotelog.IndexType{remotelog.OffsetIndex, remotelog.TimeIndex, remotelog.TransactionIndex, remotelog.LeaderEpochIndex} {
		got, err := m.FetchIndex(ctx, meta, it)
		want, werr := plain.FetchIndex(ctx, plainMeta, it)
		if err != nil || werr != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: index %v: %d bytes, %v; the plain copy's %d bytes, %v", fx.name, it, len(got), err, len(want), werr)
		}
	}
	if err := m.VerifyCopy(ctx, meta); err != nil {
		t.Fatalf("%s: verify: %v", fx.name, err)
	}
	dc, err := m.DownloadCopy(ctx, meta, t.TempDir())
	if err != nil {
		t.Fatalf("%s: download: %v", fx.name, err)
	}
	if got, _ := os.ReadFile(dc.Log); !bytes.Equal(got, fx.data) {
		t.Fatalf("%s: downloaded .log of %d bytes differs from the %d-byte original", fx.name, len(got), len(fx.data))
	}
	if missing, err := m.MissingObjects(ctx, meta); err != nil || len(missing) > 0 {
		t.Fatalf("%s: missing %v, %v", fx.name, missing, err)
	}
}

// TestChunkedFixtureRoundTrips: every real fixture, copied in every
// chunked form, reads back byte for byte (ranges across chunk
// boundaries, indexes, verify, download), its manifest names the form
// and records the stored size; an encrypted copy's stored bytes hold no
// 16-byte run of the original's, and text-like segments shrink under zstd.
func TestChunkedFixtureRoundTrips(t *testing.T) {
	fixtures := fixtureLogs(t)
	plain, err := rsm.NewManager(memory.New(), rsm.Config{Prefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	plainMetas := make([]remotelog.SegmentMetadata, len(fixtures))
	for i, fx := range fixtures {
		plainMetas[i], _ = copyFixture(t, plain, fx)
		if plainMetas[i].Form != "" {
			t.Fatalf("plain copy of form %q", plainMetas[i].Form)
		}
	}
	for name, cfg := range chunkedForms(t) {
		t.Run(name, func(t *testing.T) {
			m, err := rsm.NewManager(memory.New(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			var original, storedBytes int64
			for i, fx := range fixtures {
				meta, mf := copyFixture(t, m, fx)
				if meta.Form != remotelog.FormChunked || mf.FormatVersion != rsm.ChunkedFormatVersion {
					t.Fatalf("%s: form %q, version %d", fx.name, meta.Form, mf.FormatVersion)
				}
				log := mf.Objects[kafkalog.LogSuffix]
				if meta.StoredSizeInBytes != log.Size || log.Chunked == nil || log.Chunked.OriginalSize != int64(len(fx.data)) {
					t.Fatalf("%s: stored %d, .log object %+v", fx.name, meta.StoredSizeInBytes, log)
				}
				if (mf.Encryption != nil) != cfg.Objects.Encryption || (mf.MAC != "") != cfg.Objects.Encryption || (mf.Digest == "") != cfg.Objects.Encryption {
					t.Fatalf("%s: encryption %+v, mac %q, digest %q", fx.name, mf.Encryption, mf.MAC, mf.Digest)
				}
				if cfg.Objects.Encryption && log.Chunked.OriginalCRC32C != "" {
					t.Fatalf("%s: an encrypted copy's manifest tells the original's CRC", fx.name)
				}
				for suffix, o := range mf.Objects {
					chunks, err := chunked.DecodeIndex(o.Chunked.Chunks)
					if err != nil {
						t.Fatal(err)
					}
					for k, c := range chunks {
						if (c.Flags&chunked.FlagEncrypted != 0) != cfg.Objects.Encryption {
							t.Fatalf("%s: object %s chunk %d has flags %#x", fx.name, suffix, k, c.Flags)
						}
					}
				}
				checkReadsBack(t, m, plain, meta, plainMetas[i], fx)
				// A fresh Manager (no layouts kept) reads it too.
				fresh, _ := rsm.NewManager(m.Bucket(), cfg)
				if got, err := readRange(fresh, meta, 0, -1); err != nil || !bytes.Equal(got, fx.data) {
					t.Fatalf("%s: fresh manager: %d bytes, %v", fx.name, len(got), err)
				}
				st := stored(t, m, log.Key)
				if cfg.Objects.Encryption && len(fx.data) >= 64 {
					for off := 0; off+16 <= len(fx.data); off += len(fx.data)/8 + 1 {
						if bytes.Contains(st, fx.data[off:off+16]) {
							t.Fatalf("%s: stored bytes hold the original's bytes at %d", fx.name, off)
						}
					}
				}
				original += int64(len(fx.data))
				storedBytes += int64(len(st))
			}
			t.Logf("%s: %d original bytes stored in %d (%.3f)", name, original, storedBytes, float64(storedBytes)/float64(original))
			if cfg.Objects.Compression && storedBytes*10 > original*9 {
				t.Errorf("compressed fixtures take %d of %d bytes, want at most 90%%", storedBytes, original)
			}
		})
	}
}

// TestChunkedOnMinIO: the chunked forms over real S3 (both bucket
// implementations on MinIO), with the two largest fixtures (many chunks)
// and a small one, and reads of old plain copies by a chunked Manager.
func TestChunkedOnMinIO(t *testing.T) {
	fixtures := fixtureLogs(t)
	sort.Slice(fixtures, func(i, j int) bool { return len(fixtures[i].data) > len(fixtures[j].data) })
	picked := []fixtureLog{fixtures[0], fixtures[1], fixtures[len(fixtures)/2]}
	srv := rsmtest.StartMinIO(t)
	buckets := map[string]func(name string) rsm.Bucket{
		"minio-go": func(name string) rsm.Bucket {
			srv.CreateBucket(t, name)
			cfg := minio.DefaultConfig()
			cfg.Endpoint, cfg.Bucket, cfg.Insecure, cfg.PartSize = srv.Endpoint, name, true, 5<<20
			b, err := minio.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		"aws-sdk-go-v2": func(name string) rsm.Bucket {
			srv.CreateBucket(t, name)
			cfg := s3.DefaultConfig()
			cfg.Endpoint, cfg.Bucket, cfg.PathStyle, cfg.PartSize = "http://"+srv.Endpoint, name, true, 5<<20
			b, err := s3.New(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
	forms := chunkedForms(t)
	for bname, newBucket := range buckets {
		t.Run(bname, func(t *testing.T) {
			b := newBucket("chunked-" + strings.ReplaceAll(bname, "-", ""))
			plain, err := rsm.NewManager(b, rsm.Config{Prefix: "p"})
			if err != nil {
				t.Fatal(err)
			}
			cfg := forms["zstd+encrypted"]
			m, err := rsm.NewManager(b, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, fx := range picked {
				plainMeta, _ := copyFixture(t, plain, fx)
				meta, _ := copyFixture(t, m, fx)
				checkReadsBack(t, m, plain, meta, plainMeta, fx)
				// The chunked Manager reads the old plain copy as it is.
				if got, err := readRange(m, plainMeta, 0, -1); err != nil || !bytes.Equal(got, fx.data) {
					t.Fatalf("%s: plain copy through a chunked manager: %d bytes, %v", fx.name, len(got), err)
				}
				if err := m.VerifyCopy(context.Background(), plainMeta); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestChunkedCopyOfUnknownForm: a row naming a form this tierd does not
// write is refused before anything is stored.
func TestChunkedCopyOfUnknownForm(t *testing.T) {
	fx := fixtureLogs(t)[0]
	b := memory.New()
	m, _ := rsm.NewManager(b, rsm.Config{Prefix: "p"})
	meta := remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "t"}, ID: remotelog.NewSegmentID(),
		StartOffset: fx.base, EndOffset: fx.base, SizeInBytes: int64(len(fx.data)), State: remotelog.CopySegmentStarted, Form: "sealed"}
	if _, err := m.CopySegment(context.Background(), meta, fx.files); err == nil || !strings.Contains(err.Error(), `form "sealed"`) {
		t.Fatalf("copy of form sealed: %v", err)
	}
	b.Iter(context.Background(), "", func(k string) error { t.Errorf("left %s", k); return nil })
}

// largestFixture returns the largest real fixture segment.
func largestFixture(t *testing.T) fixtureLog {
	fixtures := fixtureLogs(t)
	sort.Slice(fixtures, func(i, j int) bool { return len(fixtures[i].data) > len(fixtures[j].data) })
	return fixtures[0]
}

// errorsIsAny reports whether err wraps one of targets.
func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// manifestJSON decodes a stored manifest into generic JSON.
func manifestJSON(t *testing.T, data []byte) map[string]any {
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	return raw
}

// sizeRecorder records the size each Upload was given.
type sizeRecorder struct {
	rsm.Bucket
	mu    sync.Mutex
	sizes map[string]int64
}

func (s *sizeRecorder) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	s.mu.Lock()
	s.sizes[key] = size
	s.mu.Unlock()
	return s.Bucket.Upload(ctx, key, r, size)
}

// TestChunkedSmallObjectsOnePut: a chunked copy's objects up to 8 MiB go
// up with their stored size known (one PUT, as a plain object of that
// size: no multipart upload a kill could leave behind), a larger .log
// streams; the sizes given are the sizes stored.
func TestChunkedSmallObjectsOnePut(t *testing.T) {
	fx := largestFixture(t)
	rec := &sizeRecorder{Bucket: memory.New(), sizes: map[string]int64{}}
	m, _ := rsm.NewManager(rec, chunkedForms(t)["zstd+encrypted"])
	_, mf := copyFixture(t, m, fx)
	for suffix, o := range mf.Objects {
		if got := rec.sizes[o.Key]; got != o.Size {
			t.Errorf("%s uploaded with size %d, stored %d", suffix, got, o.Size)
		}
	}
	big := fx
	big.data = make([]byte, 9<<20)
	rand.Read(big.data)
	big.files.Log = filepath.Join(t.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(big.files.Log, big.data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, mf = copyFixture(t, m, big)
	if got := rec.sizes[mf.Objects[kafkalog.LogSuffix].Key]; got != -1 {
		t.Errorf("a 9 MiB .log uploaded with size %d, want -1 (streamed)", got)
	}
	if got := rec.sizes[mf.Objects[kafkalog.IndexSuffix].Key]; got != mf.Objects[kafkalog.IndexSuffix].Size {
		t.Errorf("its index uploaded with size %d", got)
	}
}
