package rsm_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
)

var crc32cHex = regexp.MustCompile(`^[0-9a-f]{8}$`)

// checksumCopy writes the local files of one segment (a .log of logSize
// varied bytes, indexes, a transaction index and a producer snapshot)
// into a new temp dir, and returns them with a COPY_SEGMENT_STARTED row.
func checksumCopy(t *testing.T, logSize int) (rsm.SegmentFiles, remotelog.SegmentMetadata, []byte) {
	t.Helper()
	src := t.TempDir()
	data := make([]byte, logSize)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	files := rsm.SegmentFiles{Log: filepath.Join(src, "0.log"), OffsetIndex: filepath.Join(src, "0.index"), TimeIndex: filepath.Join(src, "0.timeindex"),
		TxnIndex: filepath.Join(src, "0.txnindex"), ProducerSnapshot: filepath.Join(src, "0.snapshot"),
		LeaderEpochs: []remotelog.EpochEntry{{Epoch: 3, StartOffset: 100}}}
	for p, d := range map[string][]byte{files.Log: data, files.OffsetIndex: nil, files.TimeIndex: nil, files.TxnIndex: []byte("aborted"), files.ProducerSnapshot: []byte("snap")} {
		if err := os.WriteFile(p, d, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	meta := remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "t", Partition: 1}, ID: remotelog.NewSegmentID(),
		StartOffset: 100, EndOffset: 199, SizeInBytes: int64(len(data)), State: remotelog.CopySegmentStarted,
		TxnIndexPresent: true, ProducerSnapshotPresent: true}
	return files, meta, data
}

// stored returns an object's bytes as the bucket holds them.
func stored(t *testing.T, m *rsm.Manager, key string) []byte {
	t.Helper()
	rc, err := m.Bucket().GetRange(context.Background(), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// rawManifest returns a copy's manifest as decoded JSON.
func rawManifest(t *testing.T, m *rsm.Manager, meta remotelog.SegmentMetadata) map[string]any {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(stored(t, m, m.Key(meta, rsm.ManifestSuffix)), &raw); err != nil {
		t.Fatal(err)
	}
	return raw
}

// putObject replaces an object's bytes through the bucket.
func putObject(t *testing.T, m *rsm.Manager, key string, data []byte) {
	t.Helper()
	if err := m.Bucket().Upload(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

// roundTrip copies a segment into m's bucket and checks what the brief of
// format version 2 promises: the manifest (as stored, in JSON) says
// version 2 and gives every object a crc32c of 8 lowercase hex digits,
// equal to the CRC-32C of the object's stored bytes, and no sha256; the
// copy verifies and downloads back byte for byte; then, with a byte of
// the stored .log flipped (same size) by corrupt, VerifyCopy, VerifyObject
// and DownloadCopy all report ErrChecksum, and likewise with the stored
// .txnindex cut short.
func roundTrip(t *testing.T, m *rsm.Manager, logSize int, corrupt func(key string, data []byte)) {
	ctx := context.Background()
	files, meta, data := checksumCopy(t, logSize)
	mf, err := m.CopySegment(ctx, meta, files)
	if err != nil {
		t.Fatal(err)
	}
	raw := rawManifest(t, m, meta)
	if raw["formatVersion"] != 2.0 {
		t.Errorf("formatVersion %v, want 2", raw["formatVersion"])
	}
	objs, _ := raw["objects"].(map[string]any)
	if len(objs) != 6 {
		t.Fatalf("manifest lists %d objects, want 6: %v", len(objs), objs)
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for suffix, v := range objs {
		o, _ := v.(map[string]any)
		sum, _ := o["crc32c"].(string)
		if _, has := o["sha256"]; has || !crc32cHex.MatchString(sum) {
			t.Errorf("object %s: %v, want a crc32c of 8 lowercase hex digits and no sha256", suffix, o)
			continue
		}
		body := stored(t, m, mf.Objects[suffix].Key)
		if want := fmt.Sprintf("%08x", crc32.Checksum(body, castagnoli)); sum != want || o["size"] != float64(len(body)) {
			t.Errorf("object %s: crc32c %s, size %v; the stored %d bytes have %s", suffix, sum, o["size"], len(body), want)
		}
	}
	if err := m.VerifyCopy(ctx, meta); err != nil {
		t.Fatalf("verify a good copy: %v", err)
	}
	dir := t.TempDir()
	d, err := m.DownloadCopy(ctx, meta, dir)
	if err != nil {
		t.Fatalf("download a good copy: %v", err)
	}
	if got, _ := os.ReadFile(d.Log); !bytes.Equal(got, data) || string(d.TxnIndex) != "aborted" || string(d.ProducerSnapshot) != "snap" {
		t.Fatalf("downloaded .log of %d bytes (equal %t), txnindex %q, snapshot %q", len(got), bytes.Equal(got, data), d.TxnIndex, d.ProducerSnapshot)
	}
	os.Remove(d.Log)

	logKey := mf.Objects[kafkalog.LogSuffix].Key
	bad := append([]byte(nil), data...)
	bad[len(bad)*2/3] ^= 0x10
	corrupt(logKey, bad)
	if err := m.VerifyCopy(ctx, meta); !errors.Is(err, rsm.ErrChecksum) {
		t.Errorf("verify with a flipped byte in the .log: %v, want ErrChecksum", err)
	}
	if err := m.VerifyObject(ctx, mf.Objects[kafkalog.LogSuffix]); !errors.Is(err, rsm.ErrChecksum) {
		t.Errorf("verify the .log object with a flipped byte: %v, want ErrChecksum", err)
	}
	if _, err := m.DownloadCopy(ctx, meta, dir); !errors.Is(err, rsm.ErrChecksum) {
		t.Errorf("download with a flipped byte in the .log: %v, want ErrChecksum", err)
	}
	corrupt(logKey, data[:len(data)/2]) // truncated: the cheap check finds it too
	want := fmt.Sprintf(".log (holds %d of its %d bytes)", len(data)/2, len(data))
	if missing, err := m.MissingObjects(ctx, meta); err != nil || len(missing) != 1 || missing[0] != want {
		t.Errorf("MissingObjects with the .log cut in half: %q, %v; want [%q]", missing, err, want)
	}
	corrupt(logKey, data)
	if err := m.VerifyCopy(ctx, meta); err != nil {
		t.Fatalf("verify with the .log restored: %v", err)
	}
	if missing, err := m.MissingObjects(ctx, meta); err != nil || len(missing) != 0 {
		t.Errorf("MissingObjects of a whole copy: %q, %v", missing, err)
	}
	corrupt(mf.Objects[kafkalog.TxnIndexSuffix].Key, []byte("abort"))
	if err := m.VerifyCopy(ctx, meta); !errors.Is(err, rsm.ErrChecksum) {
		t.Errorf("verify with a truncated .txnindex: %v, want ErrChecksum", err)
	}
	if _, err := m.DownloadCopy(ctx, meta, dir); !errors.Is(err, rsm.ErrChecksum) {
		t.Errorf("download with a truncated .txnindex: %v, want ErrChecksum", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left by failed downloads: %v", left)
	}
}

// TestCopyChecksumCRC32CFilesystem: a copy on the filesystem bucket
// records CRC-32C checksums, verifies and downloads, and a byte flipped
// in the stored file (written behind the bucket's back) or a truncated
// object is detected (see roundTrip).
func TestCopyChecksumCRC32CFilesystem(t *testing.T) {
	root, m := fsManager(t, "crc")
	roundTrip(t, m, 3<<20, func(key string, data []byte) {
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(key)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCopyChecksumCRC32CMinIO is roundTrip on a real MinIO through both
// S3 clients (minio-go and aws-sdk-go-v2), the .log of 17 MiB going up in
// two parts of their default 16 MiB part size (the checksum is taken in
// the read pass that feeds the parts), the damage written with a PUT
// over the object.
func TestCopyChecksumCRC32CMinIO(t *testing.T) {
	buckets, _, _ := s3Buckets(t, "crc32c", false)
	for name, b := range buckets {
		t.Run(name, func(t *testing.T) {
			m, err := rsm.NewManager(b, rsm.Config{Prefix: "crc-" + name})
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, m, 17<<20, func(key string, data []byte) { putObject(t, m, key, data) })
		})
	}
}

// oldCopy stores, by hand, the objects of a copy and a manifest of format
// version 1, as tierds before CRC-32C wrote it: every object with its
// SHA-256 and no crc32c. It returns the row and the .log's bytes.
func oldCopy(t *testing.T, m *rsm.Manager) (remotelog.SegmentMetadata, []byte) {
	t.Helper()
	data := bytes.Repeat([]byte("an old copy's record batches "), 4000)
	meta := remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "old", Partition: 0}, ID: remotelog.NewSegmentID(),
		StartOffset: 0, EndOffset: 99, SizeInBytes: int64(len(data)), State: remotelog.CopySegmentFinished}
	objects := map[string]any{}
	for suffix, body := range map[string][]byte{kafkalog.LogSuffix: data, kafkalog.IndexSuffix: {}, kafkalog.TimeIndexSuffix: {},
		remotelog.LeaderEpochIndex.Suffix(): []byte("0\n0\n")} {
		key := m.Key(meta, suffix)
		putObject(t, m, key, body)
		sum := sha256.Sum256(body)
		objects[suffix] = map[string]any{"key": key, "size": len(body), "sha256": hex.EncodeToString(sum[:])}
	}
	mf := map[string]any{"formatVersion": 1, "topic": "old", "partition": 0, "segmentId": meta.ID.String(), "startOffset": 0, "endOffset": 99,
		"maxTimestampMs": 5, "sizeInBytes": len(data), "leaderEpochs": []any{}, "txnIndexPresent": false, "producerSnapshotPresent": false,
		"createdMs": 1, "brokerId": 0, "objects": objects}
	body, err := json.MarshalIndent(mf, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	putObject(t, m, m.Key(meta, rsm.ManifestSuffix), body)
	return meta, data
}

// TestManifestVersion1StillVerified: a manifest of format version 1
// (SHA-256 only, written by hand as older tierds did) reads, its copy
// verifies and downloads, and a flipped byte in its stored .log is
// detected by VerifyCopy and DownloadCopy; the manifests listed for the
// partition include it.
func TestManifestVersion1StillVerified(t *testing.T) {
	ctx := context.Background()
	root, m := fsManager(t, "")
	meta, data := oldCopy(t, m)
	mfs, err := m.Manifests(ctx, meta.TopicPartition)
	if err != nil || len(mfs) != 1 || mfs[0].FormatVersion != 1 || mfs[0].Objects[kafkalog.LogSuffix].CRC32C != "" {
		t.Fatalf("manifests %v, %v; want the one of version 1", mfs, err)
	}
	if err := m.VerifyCopy(ctx, meta); err != nil {
		t.Fatalf("verify the old copy: %v", err)
	}
	dir := t.TempDir()
	d, err := m.DownloadCopy(ctx, meta, dir)
	if err != nil {
		t.Fatalf("download the old copy: %v", err)
	}
	if got, _ := os.ReadFile(d.Log); !bytes.Equal(got, data) {
		t.Fatalf("downloaded %d bytes, want the %d stored", len(got), len(data))
	}
	os.Remove(d.Log)

	bad := append([]byte(nil), data...)
	bad[12345] ^= 0x01
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(m.Key(meta, kafkalog.LogSuffix))), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.VerifyCopy(ctx, meta); !errors.Is(err, rsm.ErrChecksum) {
		t.Errorf("verify the old copy with a flipped byte: %v, want ErrChecksum", err)
	}
	if _, err := m.DownloadCopy(ctx, meta, dir); !errors.Is(err, rsm.ErrChecksum) {
		t.Errorf("download the old copy with a flipped byte: %v, want ErrChecksum", err)
	}
}

// TestManifestChecksumRefused: a manifest whose objects lack the checksum
// of its version, or hold a malformed one, or of an unknown version, is
// refused with ErrBadManifest and a message naming the problem, by
// ReadManifest, VerifyCopy and DownloadCopy alike (never read as a copy
// that verified); and VerifyObject refuses an ObjectInfo with no checksum.
func TestManifestChecksumRefused(t *testing.T) {
	ctx := context.Background()
	_, m := fsManager(t, "")
	files, meta, data := checksumCopy(t, 64<<10)
	mf, err := m.CopySegment(ctx, meta, files)
	if err != nil {
		t.Fatal(err)
	}
	good := stored(t, m, m.Key(meta, rsm.ManifestSuffix))
	logSum := sha256.Sum256(data)
	for _, c := range []struct {
		name    string
		version int
		log     map[string]any // the .log object's checksum fields
		want    string
	}{
		{"neither checksum", 2, map[string]any{}, "records no checksum (neither crc32c nor sha256)"},
		{"version 1, neither", 1, map[string]any{}, "records no checksum (neither crc32c nor sha256)"},
		{"version 2 with sha256 only", 2, map[string]any{"sha256": hex.EncodeToString(logSum[:])}, "records no crc32c"},
		{"version 1 with crc32c only", 1, map[string]any{"crc32c": mf.Objects[kafkalog.LogSuffix].CRC32C}, "records no sha256"},
		{"crc32c of 7 digits", 2, map[string]any{"crc32c": "1234567"}, "not 8 lowercase hex digits"},
		{"crc32c in upper case", 2, map[string]any{"crc32c": "ABCDEF01"}, "not 8 lowercase hex digits"},
		{"sha256 not hex", 1, map[string]any{"sha256": strings.Repeat("g", 64)}, "not 64 lowercase hex digits"},
		{"unknown version", 4, map[string]any{"crc32c": mf.Objects[kafkalog.LogSuffix].CRC32C}, "format version 4, this tierd reads 1 to 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var raw map[string]any
			if err := json.Unmarshal(good, &raw); err != nil {
				t.Fatal(err)
			}
			raw["formatVersion"] = c.version
			objs := raw["objects"].(map[string]any)
			for suffix, v := range objs {
				if o := v.(map[string]any); c.version == 1 && suffix != kafkalog.LogSuffix {
					sum := sha256.Sum256(stored(t, m, o["key"].(string)))
					delete(o, "crc32c")
					o["sha256"] = hex.EncodeToString(sum[:])
				}
			}
			o := objs[kafkalog.LogSuffix].(map[string]any)
			delete(o, "crc32c")
			for k, v := range c.log {
				o[k] = v
			}
			body, _ := json.Marshal(raw)
			putObject(t, m, m.Key(meta, rsm.ManifestSuffix), body)
			_, err := m.ReadManifest(ctx, m.Key(meta, rsm.ManifestSuffix))
			if !errors.Is(err, rsm.ErrBadManifest) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("read: %v, want ErrBadManifest saying %q", err, c.want)
			}
			if err := m.VerifyCopy(ctx, meta); !errors.Is(err, rsm.ErrBadManifest) {
				t.Errorf("verify: %v, want ErrBadManifest", err)
			}
			if _, err := m.DownloadCopy(ctx, meta, t.TempDir()); !errors.Is(err, rsm.ErrBadManifest) {
				t.Errorf("download: %v, want ErrBadManifest", err)
			}
		})
	}
	putObject(t, m, m.Key(meta, rsm.ManifestSuffix), good)
	if err := m.VerifyCopy(ctx, meta); err != nil {
		t.Fatalf("verify with the good manifest back: %v", err)
	}
	bare := mf.Objects[kafkalog.LogSuffix]
	bare.CRC32C = ""
	if err := m.VerifyObject(ctx, bare); !errors.Is(err, rsm.ErrBadManifest) || !strings.Contains(err.Error(), "no checksum") {
		t.Errorf("verify an object with no checksum: %v, want ErrBadManifest", err)
	}
}

// fsManager returns a manager (key prefix prefix) of a filesystem bucket
// in a new temporary directory, and that directory (root), so that tests
// can damage stored objects behind the bucket's back.
func fsManager(t *testing.T, prefix string) (root string, m *rsm.Manager) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "bucket")
	b, err := filesystem.New(filesystem.Config{Dir: root})
	if err != nil {
		t.Fatal(err)
	}
	if m, err = rsm.NewManager(b, rsm.Config{Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	return root, m
}
