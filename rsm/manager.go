package rsm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
)

// ManifestFormatVersion is the manifest version this code writes: 2,
// whose objects carry a CRC-32C. It reads versions 1 (objects carry a
// SHA-256, written by tierds before version 2) and 2; see the package doc.
const ManifestFormatVersion = 2

// oldestManifestFormatVersion is the oldest manifest version this code reads.
const oldestManifestFormatVersion = 1

const (
	// ManifestSuffix ends the key of a copy's manifest, written last.
	ManifestSuffix = ".manifest.json"
	manifestSuffix = ManifestSuffix
	logSuffix      = kafkalog.LogSuffix
)

// Errors of the manager.
var (
	ErrBadManifest = errors.New("rsm: bad manifest")
	ErrChecksum    = errors.New("rsm: checksum mismatch")
)

// Config configures a Manager.
type Config struct {
	// Prefix is prepended to every key, without a trailing '/'. Default ""
	// (keys start with the partition).
	Prefix string `yaml:"prefix"`
}

// Validate checks the prefix.
func (c Config) Validate() error {
	if strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/") {
		return fmt.Errorf("rsm: prefix %q must not start or end with '/'", c.Prefix)
	}
	return nil
}

// Manager copies, reads and deletes segment copies in a Bucket.
type Manager struct {
	b   Bucket
	cfg Config
	now func() time.Time
}

// NewManager returns a Manager over b.
func NewManager(b Bucket, cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Manager{b: b, cfg: cfg, now: time.Now}, nil
}

// Bucket returns the underlying bucket.
func (m *Manager) Bucket() Bucket { return m.b }

// PartitionPrefix returns the key prefix of one partition's objects, ending
// in '/'.
func (m *Manager) PartitionPrefix(tp remotelog.TopicPartition) string {
	return path.Join(m.cfg.Prefix, tp.String()) + "/"
}

// Key returns the key of one object of a segment copy; suffix is ".log",
// an IndexType's Suffix, or ".manifest.json".
func (m *Manager) Key(meta remotelog.SegmentMetadata, suffix string) string {
	return fmt.Sprintf("%s%020d-%s%s", m.PartitionPrefix(meta.TopicPartition), meta.StartOffset, meta.ID, suffix)
}

// ParseKey returns the base offset and segment id in an object key of this
// layout, and ok false for other keys.
func ParseKey(key string) (base int64, id remotelog.SegmentID, suffix string, ok bool) {
	name := path.Base(key)
	dash := strings.IndexByte(name, '-')
	if dash != 20 || len(name) < 21+22 {
		return 0, id, "", false
	}
	base, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil {
		return 0, id, "", false
	}
	id, err = remotelog.ParseSegmentID(name[21 : 21+22])
	if err != nil {
		return 0, id, "", false
	}
	return base, id, name[21+22:], true
}

// ObjectInfo is one object of a copy, as the manifest records it: its
// key, its size in bytes, and a checksum of its bytes (see the package
// doc's "Manifest").
type ObjectInfo struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
	// CRC32C is the CRC-32C (Castagnoli) of the object's bytes, 8
	// lowercase hex digits; what format version 2 records. "" in
	// manifests of version 1.
	CRC32C string `json:"crc32c,omitempty"`
	// SHA256 is the SHA-256 of the object's bytes, 64 lowercase hex
	// digits; what format version 1 records. "" in manifests this tierd
	// writes.
	SHA256 string `json:"sha256,omitempty"`
}

// Manifest describes one complete segment copy (see the package doc).
type Manifest struct {
	FormatVersion           int                    `json:"formatVersion"`
	Topic                   string                 `json:"topic"`
	TopicID                 string                 `json:"topicId,omitempty"`
	Partition               int32                  `json:"partition"`
	SegmentID               remotelog.SegmentID    `json:"segmentId"`
	StartOffset             int64                  `json:"startOffset"`
	EndOffset               int64                  `json:"endOffset"`
	MaxTimestampMs          int64                  `json:"maxTimestampMs"`
	SizeInBytes             int64                  `json:"sizeInBytes"`
	LocalSizeInBytes        int64                  `json:"localSizeInBytes,omitempty"`
	LeaderEpochs            []remotelog.EpochEntry `json:"leaderEpochs"`
	TxnIndexPresent         bool                   `json:"txnIndexPresent"`
	ProducerSnapshotPresent bool                   `json:"producerSnapshotPresent"`
	CreatedMs               int64                  `json:"createdMs"`
	BrokerID                int32                  `json:"brokerId"`
	InstanceID              string                 `json:"instanceId,omitempty"`
	CopyLeaderEpoch         *int32                 `json:"copyLeaderEpoch,omitempty"`
	Compacted               bool                   `json:"compacted,omitempty"`
	// CompactionOf names the copies a remote compaction merged into this
	// one, oldest first (see the package doc); absent otherwise.
	CompactionOf []remotelog.SegmentID `json:"compactionOf,omitempty"`
	Objects      map[string]ObjectInfo `json:"objects"`
}

// Metadata returns the COPY_SEGMENT_FINISHED row the manifest stands for.
func (mf *Manifest) Metadata() remotelog.SegmentMetadata {
	return remotelog.SegmentMetadata{
		TopicPartition: remotelog.TopicPartition{Topic: mf.Topic, Partition: mf.Partition}, TopicID: mf.TopicID,
		ID: mf.SegmentID, StartOffset: mf.StartOffset, EndOffset: mf.EndOffset,
		MaxTimestampMs: mf.MaxTimestampMs, EventTimestampMs: mf.CreatedMs,
		SegmentLeaderEpochs: mf.LeaderEpochs, SizeInBytes: mf.SizeInBytes, LocalSizeInBytes: mf.LocalSizeInBytes,
		State: remotelog.CopySegmentFinished, BrokerID: mf.BrokerID, InstanceID: mf.InstanceID, CopyLeaderEpoch: mf.CopyLeaderEpoch,
		TxnIndexPresent: mf.TxnIndexPresent, ProducerSnapshotPresent: mf.ProducerSnapshotPresent, Compacted: mf.Compacted, CompactionOf: mf.CompactionOf,
	}
}

// SegmentFiles are the local files of one rolled segment to copy.
type SegmentFiles struct {
	Log, OffsetIndex, TimeIndex string // paths; required
	TxnIndex                    string // path, or "" when absent
	ProducerSnapshot            string // path, or "" when absent
	LeaderEpochs                []remotelog.EpochEntry
	// BeforeManifest, when set, is called after every other object is
	// stored and before the manifest is written; an error aborts the copy
	// (a leader-epoch fence check, see Fence).
	BeforeManifest func(context.Context) error
	// Progress, when set, is called with the number of bytes of the .log
	// read for upload so far, each time more are read (from the
	// goroutine that uploads; it must not block).
	Progress func(bytes int64)
	// Throttle, when set, wraps the reader of every object's bytes on
	// their way up (the copy quota, package quota); the manifest is not
	// throttled.
	Throttle func(ctx context.Context, r io.Reader) io.Reader
}

// throttled applies files.Throttle to r.
func (files SegmentFiles) throttled(ctx context.Context, r io.Reader) io.Reader {
	if files.Throttle == nil {
		return r
	}
	return files.Throttle(ctx, r)
}

// CopySegment uploads a segment's files for the COPY_SEGMENT_STARTED row
// meta, data first and the manifest last, and returns the manifest. Files
// are streamed; indexes are cut to their real entries. The .log goes
// whole, or, when meta.LocalSizeInBytes is set, as its first
// meta.SizeInBytes bytes (the zero tail of a preallocated segment is left
// out); the file must then be meta.LocalSizeInBytes long. On any error
// the objects this call uploaded are deleted (best effort) and the error
// is returned; the caller then marks the row for deletion.
func (m *Manager) CopySegment(ctx context.Context, meta remotelog.SegmentMetadata, files SegmentFiles) (_ *Manifest, err error) {
	if meta.LocalSizeInBytes != 0 && (meta.SizeInBytes < 0 || meta.SizeInBytes >= meta.LocalSizeInBytes) {
		return nil, fmt.Errorf("rsm: copy of %d bytes of a %d-byte .log: the copy must be shorter than the file", meta.SizeInBytes, meta.LocalSizeInBytes)
	}
	mf := &Manifest{
		FormatVersion: ManifestFormatVersion, Topic: meta.TopicPartition.Topic, TopicID: meta.TopicID, Partition: meta.TopicPartition.Partition,
		SegmentID: meta.ID, StartOffset: meta.StartOffset, EndOffset: meta.EndOffset, MaxTimestampMs: meta.MaxTimestampMs,
		SizeInBytes: meta.SizeInBytes, LocalSizeInBytes: meta.LocalSizeInBytes, LeaderEpochs: files.LeaderEpochs,
		TxnIndexPresent: files.TxnIndex != "", ProducerSnapshotPresent: files.ProducerSnapshot != "",
		CreatedMs: m.now().UnixMilli(), BrokerID: meta.BrokerID, InstanceID: meta.InstanceID, CopyLeaderEpoch: meta.CopyLeaderEpoch, Objects: map[string]ObjectInfo{},
		Compacted:    meta.Compacted,
		CompactionOf: meta.CompactionOf,
	}
	defer func() {
		if err != nil {
			m.deleteObjects(context.WithoutCancel(ctx), mf)
		}
	}()
	logPart := part{n: -1, progress: files.Progress}
	if meta.LocalSizeInBytes > 0 {
		logPart = part{n: meta.SizeInBytes, fileSize: meta.LocalSizeInBytes, progress: files.Progress}
	}
	if err := m.uploadFile(ctx, mf, meta, logSuffix, files.Log, logPart, files); err != nil {
		return nil, err
	}
	for _, ix := range []struct {
		suffix, path string
		entry        int
	}{{kafkalog.IndexSuffix, files.OffsetIndex, index.OffsetEntrySize}, {kafkalog.TimeIndexSuffix, files.TimeIndex, index.TimeEntrySize}} {
		data, err := realIndex(ix.path, meta.StartOffset, ix.suffix)
		if err != nil {
			return nil, err
		}
		if err := m.uploadBytes(ctx, mf, meta, ix.suffix, data, files); err != nil {
			return nil, err
		}
	}
	for _, opt := range []struct{ suffix, path string }{
		{kafkalog.TxnIndexSuffix, files.TxnIndex}, {kafkalog.SnapshotSuffix, files.ProducerSnapshot},
	} {
		if opt.path == "" {
			continue
		}
		if err := m.uploadFile(ctx, mf, meta, opt.suffix, opt.path, part{n: -1}, files); err != nil {
			return nil, err
		}
	}
	if err := m.uploadBytes(ctx, mf, meta, remotelog.LeaderEpochIndex.Suffix(), epoch.Encode(files.LeaderEpochs), files); err != nil {
		return nil, err
	}
	if files.BeforeManifest != nil {
		if err := files.BeforeManifest(ctx); err != nil {
			return nil, err
		}
	}
	body, err := json.MarshalIndent(mf, "", "  ")
	if err != nil {
		return nil, err
	}
	key := m.Key(meta, manifestSuffix)
	if err := m.b.Upload(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return nil, fmt.Errorf("upload %s: %w", key, err)
	}
	return mf, nil
}

// realIndex reads an index file and returns its real entries' bytes.
func realIndex(p string, base int64, suffix string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var n int
	if suffix == kafkalog.IndexSuffix {
		var e []index.OffsetEntry
		e, err = index.ParseOffsetIndex(data, base)
		n = len(e) * index.OffsetEntrySize
	} else {
		var e []index.TimeEntry
		e, err = index.ParseTimeIndex(data, base)
		n = len(e) * index.TimeEntrySize
	}
	if err != nil {
		return nil, kafkalog.WithFile(err, p)
	}
	return data[:n], nil
}

// part says how much of a file to upload: n bytes from its start, from a
// file of fileSize bytes; n -1 uploads the whole file, whatever its size.
// progress, when set, is told the bytes read so far.
type part struct {
	n, fileSize int64
	progress    func(int64)
}

func (m *Manager) uploadFile(ctx context.Context, mf *Manifest, meta remotelog.SegmentMetadata, suffix, p string, pt part, files SegmentFiles) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if pt.n >= 0 {
		if size != pt.fileSize {
			return fmt.Errorf("upload the first %d bytes of %s: the file holds %d bytes, not %d (file changed since it was checked)", pt.n, p, size, pt.fileSize)
		}
		size = pt.n
	}
	h := crc32.New(castagnoli)
	key := m.Key(meta, suffix)
	mf.Objects[suffix] = ObjectInfo{Key: key} // recorded first so a failed upload is cleaned up
	cr := &countingReader{r: io.TeeReader(files.throttled(ctx, io.LimitReader(f, size)), h), progress: pt.progress}
	if err := m.b.Upload(ctx, key, cr, size); err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	if cr.n != size {
		return fmt.Errorf("upload %s: read %d of %d bytes (file changed during copy)", key, cr.n, size)
	}
	mf.Objects[suffix] = ObjectInfo{Key: key, Size: cr.n, CRC32C: crc32cHex(h.Sum32())}
	return nil
}

func (m *Manager) uploadBytes(ctx context.Context, mf *Manifest, meta remotelog.SegmentMetadata, suffix string, data []byte, files SegmentFiles) error {
	key := m.Key(meta, suffix)
	mf.Objects[suffix] = ObjectInfo{Key: key}
	if err := m.b.Upload(ctx, key, files.throttled(ctx, bytes.NewReader(data)), int64(len(data))); err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	mf.Objects[suffix] = ObjectInfo{Key: key, Size: int64(len(data)), CRC32C: crc32cHex(crc32.Checksum(data, castagnoli))}
	return nil
}

type countingReader struct {
	r        io.Reader
	n        int64
	progress func(int64) // nil: none
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if n > 0 && c.progress != nil {
		c.progress(c.n)
	}
	return n, err
}

// FetchLogSegment returns bytes [start, end) of the copy's .log (end -1:
// to the end of the segment), read with one ranged GET.
func (m *Manager) FetchLogSegment(ctx context.Context, meta remotelog.SegmentMetadata, start, end int64) (io.ReadCloser, error) {
	length := int64(-1)
	if end >= 0 {
		length = end - start
	}
	return m.b.GetRange(ctx, m.Key(meta, logSuffix), start, length)
}

// FetchIndex returns one index of a copy. An absent transaction index or
// producer snapshot gives empty bytes and no error, as Kafka's RSM does.
func (m *Manager) FetchIndex(ctx context.Context, meta remotelog.SegmentMetadata, t remotelog.IndexType) ([]byte, error) {
	if (t == remotelog.TransactionIndex && !meta.TxnIndexPresent) || (t == remotelog.ProducerSnapshot && !meta.ProducerSnapshotPresent) {
		return nil, nil
	}
	return m.readAll(ctx, m.Key(meta, t.Suffix()))
}

func (m *Manager) readAll(ctx context.Context, key string) ([]byte, error) {
	rc, err := m.b.GetRange(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return data, nil
}

// ReadManifest reads and checks the manifest of a copy: a format version
// this tierd reads (1 or 2), a .log object, offsets in order, and every
// object's checksum present and well-formed for its version. Errors:
// ErrNotFound (wrapped) for a missing manifest; ErrBadManifest (wrapped)
// naming what is wrong; transport errors.
func (m *Manager) ReadManifest(ctx context.Context, key string) (*Manifest, error) {
	data, err := m.readAll(ctx, key)
	if err != nil {
		return nil, err
	}
	var mf Manifest
	if err := json.Unmarshal(data, &mf); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrBadManifest, key, err)
	}
	if mf.FormatVersion < oldestManifestFormatVersion || mf.FormatVersion > ManifestFormatVersion {
		return nil, fmt.Errorf("%w %s: format version %d, this tierd reads %d to %d", ErrBadManifest, key, mf.FormatVersion,
			oldestManifestFormatVersion, ManifestFormatVersion)
	}
	if mf.Objects[logSuffix].Key == "" || mf.EndOffset < mf.StartOffset {
		return nil, fmt.Errorf("%w %s: incomplete", ErrBadManifest, key)
	}
	for _, suffix := range slices.Sorted(maps.Keys(mf.Objects)) {
		if err := checkObjectSums(mf.FormatVersion, suffix, mf.Objects[suffix]); err != nil {
			return nil, fmt.Errorf("%w %s: %v", ErrBadManifest, key, err)
		}
	}
	return &mf, nil
}

// Manifests lists the manifests of one partition, oldest base offset
// first. Unreadable manifests are returned as errors after the rest.
func (m *Manager) Manifests(ctx context.Context, tp remotelog.TopicPartition) ([]*Manifest, error) {
	var out []*Manifest
	var errs []error
	err := m.b.Iter(ctx, m.PartitionPrefix(tp), func(key string) error {
		if !strings.HasSuffix(key, manifestSuffix) {
			return nil
		}
		mf, err := m.ReadManifest(ctx, key)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		out = append(out, mf)
		return nil
	})
	return out, errors.Join(append(errs, err)...)
}

// Partitions lists the partitions that have objects in the bucket under
// the prefix.
func (m *Manager) Partitions(ctx context.Context) ([]remotelog.TopicPartition, error) {
	prefix := ""
	if m.cfg.Prefix != "" {
		prefix = m.cfg.Prefix + "/"
	}
	seen := map[remotelog.TopicPartition]bool{}
	var out []remotelog.TopicPartition
	err := m.b.Iter(ctx, prefix, func(key string) error {
		rest := strings.TrimPrefix(key, prefix)
		dir, _, ok := strings.Cut(rest, "/")
		if !ok {
			return nil
		}
		if tp, ok := kafkalog.ParsePartitionDir(dir); ok && !seen[tp] {
			seen[tp] = true
			out = append(out, tp)
		}
		return nil
	})
	return out, err
}
