package rsm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/lru"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/chunked"
)

// ManifestFormatVersion is the manifest version this code writes for a
// copy stored as it came: 2, whose objects carry a CRC-32C. It reads
// versions 1 (objects carry a SHA-256, written by tierds before version
// 2), 2 and 3 (ChunkedFormatVersion); see the package doc.
const ManifestFormatVersion = 2

// ChunkedFormatVersion is the manifest version of a copy whose objects
// are in chunked form (package chunked): 3, so that a tierd that does not
// know the form refuses the copy rather than serve its stored bytes.
const ChunkedFormatVersion = 3

// maxManifestBytes bounds a manifest read: a 2 GiB segment's copy in
// 64 KiB chunks has an index of about 350 KiB per object.
const maxManifestBytes = 16 << 20

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
	// ErrPanic marks a panic in one of the goroutines of a copy's upload
	// or check, recovered and returned as an error.
	ErrPanic = errors.New("rsm: panic")
)

// Config configures a Manager.
type Config struct {
	// Prefix is prepended to every key, without a trailing '/'. Default ""
	// (keys start with the partition).
	Prefix string `yaml:"prefix"`
	// Objects says how new copies are stored (package chunked). The zero
	// value stores them as they came; copies of every form are read
	// whatever it says.
	Objects chunked.Config `yaml:"-"`
	// Keys wraps and unwraps copies' data keys; required when
	// Objects.Encryption is set, and to read encrypted copies.
	Keys chunked.KeyWrapper `yaml:"-"`
	// Metrics counts the chunked form's chunks, bytes and encryption
	// failures; nil counts nothing.
	Metrics *ObjectMetrics `yaml:"-"`
}

// Validate checks the prefix, the object form, and that encryption has
// keys.
func (c Config) Validate() error {
	if strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/") {
		return fmt.Errorf("rsm: prefix %q must not start or end with '/'", c.Prefix)
	}
	if err := c.Objects.Validate(); err != nil {
		return fmt.Errorf("rsm: %w", err)
	}
	if c.Objects.Encryption && c.Keys == nil {
		return errors.New("rsm: encryption.enabled needs keys (encryption.keys)")
	}
	return nil
}

// Manager copies, reads and deletes segment copies in a Bucket.
type Manager struct {
	b       Bucket
	cfg     Config
	now     func() time.Time
	codec   *chunked.Codec
	layouts *lru.Cache[remotelog.SegmentID, *copyLayout]
}

// NewManager returns a Manager over b.
func NewManager(b Bucket, cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	codec, err := chunked.NewCodec(cfg.Objects)
	if err != nil {
		return nil, err
	}
	return &Manager{b: b, cfg: cfg, now: time.Now, codec: codec, layouts: lru.New[remotelog.SegmentID, *copyLayout](layoutCacheEntries)}, nil
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
	// Chunked describes an object in chunked form, whose Size and CRC32C
	// are of the stored bytes; nil for an object stored as it came.
	Chunked *ChunkedInfo `json:"chunked,omitempty"`
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
	// BrokerOwned marks a copy a Kafka broker made through tierd's RSM
	// endpoint, owned by the broker's remote log metadata (see the
	// package doc); absent (false) on tierd's own copies.
	BrokerOwned bool                  `json:"brokerOwned,omitempty"`
	Objects     map[string]ObjectInfo `json:"objects"`
	// Encryption is the envelope of an encrypted copy's data key; nil
	// when the copy is not encrypted.
	Encryption *Envelope `json:"encryption,omitempty"`
	// MAC authenticates an encrypted copy's manifest (package chunked,
	// "Manifest authentication"), 64 lowercase hex digits; "" otherwise.
	MAC string `json:"mac,omitempty"`
	// Digest is the SHA-256 of a chunked copy's manifest that is not
	// encrypted (package chunked, "Manifest authentication"), 64 lowercase
	// hex digits; "" otherwise.
	Digest string `json:"digest,omitempty"`
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
		Form: mf.Form(), StoredSizeInBytes: mf.storedLogSize(), Encrypted: mf.Encryption != nil,
	}
}

// File is a file of a copy opened for reading (SegmentFiles.Open);
// *os.File is one.
type File interface {
	io.Reader
	io.Closer
	// Stat describes the file; CopySegment reads its Size (bytes).
	Stat() (fs.FileInfo, error)
}

// SegmentFiles are the local files of one rolled segment to copy.
type SegmentFiles struct {
	Log, OffsetIndex, TimeIndex string // paths; required
	TxnIndex                    string // path, or "" when absent
	ProducerSnapshot            string // path, or "" when absent
	// LeaderEpochs are the segment's leader epochs (epoch and start
	// offset, of its offset range), recorded in the manifest.
	LeaderEpochs []remotelog.EpochEntry
	// LeaderEpochCheckpoint, when not nil, is the whole
	// .leader-epoch-checkpoint object, stored byte for byte: the
	// broker's LogSegmentData.leaderEpochIndex buffer, the partition's
	// epoch history up to the segment's end in Kafka's checkpoint text,
	// from which followers restore their epoch cache. When nil the object
	// is epoch.Encode(LeaderEpochs). Either way the manifest's
	// leaderEpochs are LeaderEpochs.
	LeaderEpochCheckpoint []byte
	// BrokerOwned marks the copy as a Kafka broker's, made through
	// tierd's RSM endpoint: the manifest records "brokerOwned": true.
	BrokerOwned bool
	// Open, when set, opens every file of the copy (by the paths above)
	// in place of os.Open: CopySegment reads each file once, from the
	// start, through the File it returns, and closes it. The RSM endpoint
	// opens the broker's files once and hands out new readers over those
	// handles, so the bytes it checked are the bytes uploaded and an
	// unlink during the copy changes nothing. It is called from two
	// goroutines at once (the .log's upload and the small objects'), so
	// it must be safe for concurrent use. Errors it returns fail the copy.
	Open func(path string) (File, error)
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

// FetchLogSegment returns bytes [start, end) of the copy's .log (end -1:
// to the end of the segment), read with one ranged GET; of a copy in
// chunked form (meta.Form), the GET of the chunks the range covers,
// decoded as they arrive (the first read of such a copy by this Manager
// reads its manifest too). Errors: the bucket's; of a chunked copy
// also the manifest's (ErrBadManifest, chunked.ErrKeyUnavailable naming
// the KEK, chunked.ErrWrongKey, chunked.ErrBadMAC), and, on reading,
// chunked.ErrDamaged.
func (m *Manager) FetchLogSegment(ctx context.Context, meta remotelog.SegmentMetadata, start, end int64) (io.ReadCloser, error) {
	if meta.Form == remotelog.FormChunked {
		return m.fetchChunked(ctx, meta, start, end)
	}
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
	if meta.Form == remotelog.FormChunked {
		return m.fetchChunkedObject(ctx, meta, t.Suffix())
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
// this tierd reads (1 to 3), a .log object, offsets in order, and every
// object's checksum present and well-formed for its version. Errors:
// ErrNotFound (wrapped) for a missing manifest; ErrBadManifest (wrapped)
// naming what is wrong; transport errors.
func (m *Manager) ReadManifest(ctx context.Context, key string) (*Manifest, error) {
	mf, _, err := m.readManifest(ctx, key)
	return mf, err
}

// readManifest is ReadManifest, also returning the keys of an encrypted
// copy (nil otherwise).
func (m *Manager) readManifest(ctx context.Context, key string) (*Manifest, *chunked.CopyKeys, error) {
	rc, err := m.b.GetRange(ctx, key, 0, -1)
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", key, err)
	}
	if len(data) > maxManifestBytes {
		return nil, nil, fmt.Errorf("%w %s: more than the %d bytes a manifest takes", ErrBadManifest, key, maxManifestBytes)
	}
	return m.parseManifest(ctx, key, data)
}

// parseManifest checks the manifest data read from key.
func (m *Manager) parseManifest(ctx context.Context, key string, data []byte) (*Manifest, *chunked.CopyKeys, error) {
	var mf Manifest
	if err := json.Unmarshal(data, &mf); err != nil {
		return nil, nil, fmt.Errorf("%w %s: %v", ErrBadManifest, key, err)
	}
	if mf.FormatVersion < oldestManifestFormatVersion || mf.FormatVersion > ChunkedFormatVersion {
		return nil, nil, fmt.Errorf("%w %s: format version %d, this tierd reads %d to %d", ErrBadManifest, key, mf.FormatVersion,
			oldestManifestFormatVersion, ChunkedFormatVersion)
	}
	if base, id, suffix, ok := ParseKey(key); ok && suffix == manifestSuffix && (id != mf.SegmentID || base != mf.StartOffset) {
		return nil, nil, fmt.Errorf("%w %s: describes segment %s at %d, its key names %s at %d", ErrBadManifest, key, mf.SegmentID, mf.StartOffset, id, base)
	}
	if mf.Objects[logSuffix].Key == "" || mf.EndOffset < mf.StartOffset {
		return nil, nil, fmt.Errorf("%w %s: incomplete", ErrBadManifest, key)
	}
	for _, suffix := range slices.Sorted(maps.Keys(mf.Objects)) {
		if err := checkObjectSums(mf.FormatVersion, suffix, mf.Objects[suffix]); err != nil {
			return nil, nil, fmt.Errorf("%w %s: %v", ErrBadManifest, key, err)
		}
	}
	keys, err := m.checkChunked(ctx, key, data, &mf)
	if err != nil {
		return nil, nil, m.cfg.Metrics.failed(err, mf.Encryption != nil)
	}
	return &mf, keys, nil
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
