package rsm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/chunked"
	"github.com/tierd/tierd/rsm/memory"
)

// TestChunkedDamageDetected: in every chunked form, a byte flipped in
// any chunk of the .log fails the reads that cover that chunk (never
// wrong bytes) while reads of other chunks go on; a byte flipped in an
// index fails its fetch; VerifyCopy and DownloadCopy refuse the copy.
func TestChunkedDamageDetected(t *testing.T) {
	ctx := context.Background()
	fx := largestFixture(t)
	for name, cfg := range chunkedForms(t) {
		t.Run(name, func(t *testing.T) {
			m, _ := rsm.NewManager(memory.New(), cfg)
			meta, mf := copyFixture(t, m, fx)
			log := mf.Objects[kafkalog.LogSuffix]
			good := stored(t, m, log.Key)
			chunks, err := chunked.DecodeIndex(log.Chunked.Chunks)
			if err != nil {
				t.Fatal(err)
			}
			cb := log.Chunked.ChunkBytes
			var off int64
			for i, c := range chunks {
				for _, at := range []int64{off, off + c.StoredLen/2, off + c.StoredLen - 1} {
					bad := bytes.Clone(good)
					bad[at] ^= 0x40
					putObject(t, m, log.Key, bad)
					start, end := int64(i)*cb, min(int64(i+1)*cb, int64(len(fx.data)))
					if got, err := readRange(m, meta, start, end); !errors.Is(err, chunked.ErrDamaged) {
						t.Fatalf("chunk %d flipped at %d: read %d bytes, %v; want ErrDamaged", i, at, len(got), err)
					}
					if other := (i + 1) % len(chunks); other != i {
						s, e := int64(other)*cb, min(int64(other+1)*cb, int64(len(fx.data)))
						if got, err := readRange(m, meta, s, e); err != nil || !bytes.Equal(got, fx.data[s:e]) {
							t.Fatalf("chunk %d flipped: chunk %d read %d bytes, %v", i, other, len(got), err)
						}
					}
				}
				if i == len(chunks)/2 {
					if err := m.VerifyCopy(ctx, meta); err == nil {
						t.Fatal("verify of a damaged copy passed")
					}
					if _, err := m.DownloadCopy(ctx, meta, t.TempDir()); err == nil {
						t.Fatal("download of a damaged copy passed")
					}
				}
				off += c.StoredLen
			}
			putObject(t, m, log.Key, good)
			idx := mf.Objects[kafkalog.IndexSuffix]
			if idx.Size > 0 {
				gi := stored(t, m, idx.Key)
				bad := bytes.Clone(gi)
				bad[len(bad)/2] ^= 1
				putObject(t, m, idx.Key, bad)
				if _, err := m.FetchIndex(ctx, meta, remotelog.OffsetIndex); !errors.Is(err, chunked.ErrDamaged) {
					t.Fatalf("flipped index: %v", err)
				}
				putObject(t, m, idx.Key, gi)
			}
			if err := m.VerifyCopy(ctx, meta); err != nil {
				t.Fatalf("restored copy: %v", err)
			}
		})
	}
}

// TestChunkedManifestDamageDetected: a byte flipped anywhere in a
// chunked copy's manifest, encrypted (MAC) or not (digest), makes it
// unreadable with a clear error; an edit that keeps the JSON valid is
// refused; so is an encrypted copy's manifest moved onto another copy.
func TestChunkedManifestDamageDetected(t *testing.T) {
	ctx := context.Background()
	fx := largestFixture(t)
	for name, cfg := range chunkedForms(t) {
		t.Run(name, func(t *testing.T) {
			m, _ := rsm.NewManager(memory.New(), cfg)
			meta, _ := copyFixture(t, m, fx)
			key := m.Key(meta, rsm.ManifestSuffix)
			good := stored(t, m, key)
			for at := range good {
				bad := bytes.Clone(good)
				bad[at] ^= 0x01
				putObject(t, m, key, bad)
				fresh, _ := rsm.NewManager(m.Bucket(), cfg)
				if _, err := fresh.ReadManifest(ctx, key); !errorsIsAny(err, rsm.ErrBadManifest, chunked.ErrBadMAC, chunked.ErrWrongKey, chunked.ErrKeyUnavailable) {
					t.Fatalf("byte %d (%q) flipped: %v", at, good[at], err)
				}
				if _, err := readRange(fresh, meta, 0, 10); err == nil {
					t.Fatalf("byte %d flipped: the copy still reads", at)
				}
			}
			// Valid JSON, one number changed.
			raw := manifestJSON(t, good)
			raw["maxTimestampMs"] = raw["maxTimestampMs"].(float64) + 1
			edited, _ := json.Marshal(raw)
			putObject(t, m, key, edited)
			if _, err := m.ReadManifest(ctx, key); !errors.Is(err, chunked.ErrBadMAC) {
				t.Fatalf("edited manifest: %v, want ErrBadMAC", err)
			}
			putObject(t, m, key, good)
			if !cfg.Objects.Encryption {
				return
			}
			// Another copy's manifest, renamed to this copy's id and keys:
			// its data key is bound to the other copy.
			other, omf := copyFixture(t, m, fx)
			moved := strings.ReplaceAll(string(stored(t, m, m.Key(other, rsm.ManifestSuffix))), other.ID.String(), meta.ID.String())
			putObject(t, m, key, []byte(moved))
			if _, err := m.ReadManifest(ctx, key); !errors.Is(err, chunked.ErrWrongKey) {
				t.Fatalf("moved manifest: %v, want ErrWrongKey", err)
			}
			// The other copy's envelope spliced into this manifest.
			spliced, err := chunked.SetMembers(good, map[string]any{"encryption": omf.Encryption})
			if err != nil {
				t.Fatal(err)
			}
			putObject(t, m, key, spliced)
			if _, err := m.ReadManifest(ctx, key); !errors.Is(err, chunked.ErrWrongKey) {
				t.Fatalf("spliced envelope: %v, want ErrWrongKey", err)
			}
			putObject(t, m, key, good)
		})
	}
}

// TestChunkedKeyErrors: an encrypted copy read without its KEK, or with
// another key under its KEK's id, is an error naming the KEK, never
// bytes; a plain or unencrypted chunked copy needs no keys.
func TestChunkedKeyErrors(t *testing.T) {
	ctx := context.Background()
	fx := largestFixture(t)
	kr, _ := testKeyring(t, "kek-2024")
	o := chunked.DefaultConfig()
	o.Compression, o.Encryption = true, true
	m, err := rsm.NewManager(memory.New(), rsm.Config{Prefix: "p", Objects: o, Keys: kr})
	if err != nil {
		t.Fatal(err)
	}
	meta, _ := copyFixture(t, m, fx)
	noKeys, _ := rsm.NewManager(m.Bucket(), rsm.Config{Prefix: "p"})
	otherKR, _ := testKeyring(t, "kek-2025")
	otherID, _ := rsm.NewManager(m.Bucket(), rsm.Config{Prefix: "p", Keys: otherKR})
	sameIDKR, _ := testKeyring(t, "kek-2024")
	sameID, _ := rsm.NewManager(m.Bucket(), rsm.Config{Prefix: "p", Keys: sameIDKR})
	for _, c := range []struct {
		name string
		m    *rsm.Manager
		want error
	}{{"no keys", noKeys, chunked.ErrKeyUnavailable}, {"other KEK", otherID, chunked.ErrKeyUnavailable}, {"another key under the id", sameID, chunked.ErrWrongKey}} {
		got, err := readRange(c.m, meta, 0, -1)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), `"kek-2024"`) || len(got) > 0 {
			t.Errorf("%s: read %d bytes, %v; want %v naming kek-2024", c.name, len(got), err, c.want)
		}
		if err := c.m.VerifyCopy(ctx, meta); !errors.Is(err, c.want) {
			t.Errorf("%s: verify: %v", c.name, err)
		}
		if _, err := c.m.FetchIndex(ctx, meta, remotelog.OffsetIndex); !errors.Is(err, c.want) {
			t.Errorf("%s: index: %v", c.name, err)
		}
	}
	if _, err := rsm.NewManager(memory.New(), rsm.Config{Objects: o}); err == nil {
		t.Error("encryption without keys accepted")
	}
	// Compressed, not encrypted: no keys needed.
	o.Encryption = false
	mz, _ := rsm.NewManager(memory.New(), rsm.Config{Prefix: "p", Objects: o})
	zmeta, _ := copyFixture(t, mz, fx)
	nk, _ := rsm.NewManager(mz.Bucket(), rsm.Config{Prefix: "p"})
	if got, err := readRange(nk, zmeta, 0, -1); err != nil || !bytes.Equal(got, fx.data) {
		t.Errorf("compressed copy without keys: %d bytes, %v", len(got), err)
	}
}

// TestObjectMetrics: the chunks' outcomes and bytes of a compressed,
// encrypted copy are counted, and so are a read without the KEK and a
// damaged sealed chunk.
func TestObjectMetrics(t *testing.T) {
	fx := largestFixture(t)
	reg := prometheus.NewRegistry()
	om := rsm.NewObjectMetrics(reg)
	cfg := chunkedForms(t)["zstd+encrypted"]
	cfg.Metrics = om
	m, _ := rsm.NewManager(memory.New(), cfg)
	meta, mf := copyFixture(t, m, fx)
	value := func(name, label string) float64 {
		mfs, _ := reg.Gather()
		for _, f := range mfs {
			if f.GetName() != name {
				continue
			}
			for _, mt := range f.GetMetric() {
				if label == "" || len(mt.GetLabel()) > 0 && mt.GetLabel()[0].GetValue() == label {
					return mt.GetCounter().GetValue()
				}
			}
		}
		return -1
	}
	chunks := int((int64(len(fx.data)) + 65535) / 65536)
	if got := value("tierd_objects_chunks_total", "compressed"); got < float64(chunks) {
		t.Errorf("compressed chunks %v, want at least the .log's %d", got, chunks)
	}
	if got := value("tierd_objects_stored_bytes_total", ""); got < float64(mf.Objects[kafkalog.LogSuffix].Size) || got >= value("tierd_objects_original_bytes_total", "") {
		t.Errorf("stored %v, original %v", got, value("tierd_objects_original_bytes_total", ""))
	}
	noKeys, _ := rsm.NewManager(m.Bucket(), rsm.Config{Prefix: "p", Metrics: om})
	readRange(noKeys, meta, 0, 10)
	if got := value("tierd_objects_encryption_failures_total", "key_unavailable"); got != 1 {
		t.Errorf("key_unavailable %v", got)
	}
	log := mf.Objects[kafkalog.LogSuffix]
	bad := stored(t, m, log.Key)
	bad[100] ^= 1
	putObject(t, m, log.Key, bad)
	if _, err := readRange(m, meta, 0, -1); !errors.Is(err, chunked.ErrDamaged) {
		t.Fatal(err)
	}
	if got := value("tierd_objects_encryption_failures_total", "chunk"); got != 1 {
		t.Errorf("chunk failures %v", got)
	}
}

// TestReplacedCopyRefused: an encrypted copy replaced in the bucket, under
// its segment id, by one a writer without keys can make (chunked and not
// encrypted, whose digest is valid; or plain) is refused by every read
// of the row tierd recorded (fetch, index, verify, download): the row
// says what form the copy took and that it is encrypted. A negative
// start is an error, as for a plain copy.
func TestReplacedCopyRefused(t *testing.T) {
	ctx := context.Background()
	fx := largestFixture(t)
	forms := chunkedForms(t)
	b := memory.New()
	m, _ := rsm.NewManager(b, forms["zstd+encrypted"])
	meta, _ := copyFixture(t, m, fx)
	if !meta.Encrypted || meta.Form != remotelog.FormChunked {
		t.Fatalf("row %+v", meta)
	}
	forged := bytes.Clone(fx.data)
	copy(forged[len(forged)/2:], "EVILEVILEVILEVIL")
	p := filepath.Join(t.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(p, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	files := fx.files
	files.Log = p
	for _, c := range []struct {
		name string
		cfg  rsm.Config
	}{{"chunked, not encrypted", forms["zstd"]}, {"plain", rsm.Config{Prefix: "p"}}} {
		attacker, _ := rsm.NewManager(b, c.cfg)
		fake := meta
		fake.State, fake.Form, fake.Encrypted, fake.StoredSizeInBytes = remotelog.CopySegmentStarted, attacker.NewCopyForm(), false, 0
		if _, err := attacker.CopySegment(ctx, fake, files); err != nil {
			t.Fatal(err)
		}
		reader, _ := rsm.NewManager(b, forms["zstd+encrypted"]) // no layouts kept
		if got, err := readRange(reader, meta, 0, -1); !errors.Is(err, rsm.ErrBadManifest) || bytes.Contains(got, []byte("EVIL")) {
			t.Errorf("%s: fetch read %d bytes, %v; want ErrBadManifest", c.name, len(got), err)
		}
		if _, err := reader.FetchIndex(ctx, meta, remotelog.OffsetIndex); !errors.Is(err, rsm.ErrBadManifest) {
			t.Errorf("%s: index: %v", c.name, err)
		}
		if err := reader.VerifyCopy(ctx, meta); !errors.Is(err, rsm.ErrBadManifest) {
			t.Errorf("%s: verify: %v", c.name, err)
		}
		if _, err := reader.DownloadCopy(ctx, meta, t.TempDir()); !errors.Is(err, rsm.ErrBadManifest) {
			t.Errorf("%s: download: %v", c.name, err)
		}
	}
	if _, err := m.FetchLogSegment(ctx, meta, -1, 100); err == nil {
		t.Error("a negative start read")
	}
}
