// Package remotelog holds the domain types that remote storage (rsm) and
// remote metadata (rlmm) share, as Kafka's storage-api module defines them
// for KIP-405: segment ids, RemoteLogSegmentMetadata and its states, and
// the per-partition log offsets. Pure values, no I/O.
package remotelog

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
)

// TopicPartition names one partition.
type TopicPartition = kafkalog.TopicPartition

// EpochEntry is one leader epoch and the offset it starts at.
type EpochEntry = epoch.Entry

// SegmentID identifies one copy of a segment in remote storage (Kafka's
// RemoteLogSegmentId.id, a Uuid). Every copy attempt gets a new one, so no
// upload ever overwrites another's objects.
type SegmentID [16]byte

// NewSegmentID returns a random (version 4) id.
func NewSegmentID() SegmentID {
	var id SegmentID
	if _, err := rand.Read(id[:]); err != nil {
		panic(fmt.Sprintf("remotelog: crypto/rand: %v", err))
	}
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

// String returns the id as Kafka prints a Uuid: URL-safe base64 without
// padding, 22 characters.
func (id SegmentID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ParseSegmentID parses the String form.
func ParseSegmentID(s string) (SegmentID, error) {
	var id SegmentID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("remotelog: bad segment id %q", s)
	}
	copy(id[:], b)
	return id, nil
}

// MarshalText implements encoding.TextMarshaler.
func (id SegmentID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *SegmentID) UnmarshalText(b []byte) error {
	v, err := ParseSegmentID(string(b))
	*id = v
	return err
}

// SegmentState is RemoteLogSegmentState.
type SegmentState int8

// States, with Kafka's ids.
const (
	CopySegmentStarted    SegmentState = 0
	CopySegmentFinished   SegmentState = 1
	DeleteSegmentStarted  SegmentState = 2
	DeleteSegmentFinished SegmentState = 3
)

var stateNames = map[SegmentState]string{
	CopySegmentStarted:    "COPY_SEGMENT_STARTED",
	CopySegmentFinished:   "COPY_SEGMENT_FINISHED",
	DeleteSegmentStarted:  "DELETE_SEGMENT_STARTED",
	DeleteSegmentFinished: "DELETE_SEGMENT_FINISHED",
}

// String returns Kafka's name of the state.
func (s SegmentState) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("UNKNOWN_STATE(%d)", int8(s))
}

// MarshalText implements encoding.TextMarshaler.
func (s SegmentState) MarshalText() ([]byte, error) {
	if _, ok := stateNames[s]; !ok {
		return nil, fmt.Errorf("remotelog: unknown segment state %d", int8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *SegmentState) UnmarshalText(b []byte) error {
	for v, n := range stateNames {
		if n == string(b) {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("remotelog: unknown segment state %q", b)
}

// ErrIllegalTransition is returned by CheckTransition.
var ErrIllegalTransition = errors.New("remotelog: illegal segment state transition")

// CheckTransition enforces RemoteLogSegmentState.isValidTransition: a copy
// finishes or is deleted, a finished copy is deleted, a started delete
// finishes (or is retried), and nothing leaves DELETE_SEGMENT_FINISHED.
func CheckTransition(from, to SegmentState) error {
	ok := false
	switch from {
	case CopySegmentStarted:
		ok = to == CopySegmentFinished || to == DeleteSegmentStarted
	case CopySegmentFinished:
		ok = to == DeleteSegmentStarted
	case DeleteSegmentStarted:
		ok = to == DeleteSegmentStarted || to == DeleteSegmentFinished
	}
	if !ok {
		return fmt.Errorf("%w: %s -> %s", ErrIllegalTransition, from, to)
	}
	return nil
}

// SegmentMetadata is Kafka's RemoteLogSegmentMetadata for one copy of one
// segment, plus what tierd needs to find its objects.
type SegmentMetadata struct {
	TopicPartition TopicPartition `json:"topicPartition"`
	// TopicID is the Kafka topic id (KIP-516) of the incarnation the
	// segment belongs to, or "" when the log has none.
	TopicID string    `json:"topicId,omitempty"`
	ID      SegmentID `json:"segmentId"`
	// StartOffset is the segment's base offset; EndOffset its last offset
	// (the next segment's base offset - 1). Both inclusive.
	StartOffset int64 `json:"startOffset"`
	EndOffset   int64 `json:"endOffset"`
	// MaxTimestampMs is the largest record timestamp in the segment.
	MaxTimestampMs int64 `json:"maxTimestampMs"`
	// EventTimestampMs is when this row last changed state.
	EventTimestampMs int64 `json:"eventTimestampMs"`
	// SegmentLeaderEpochs are the epochs covering [StartOffset, EndOffset].
	SegmentLeaderEpochs []EpochEntry `json:"segmentLeaderEpochs"`
	// SizeInBytes is the size of the copy's .log, bytes: the local .log's
	// size, or its valid length when its zero tail was left out.
	SizeInBytes int64 `json:"segmentSizeInBytes"`
	// LocalSizeInBytes is the size in bytes of the local .log the copy was
	// made from when that file was larger than SizeInBytes: a segment the
	// broker preallocated (log.preallocate=true) ends in zero bytes after
	// its last batch, which are not copied. 0 when the copy is the whole
	// file, and in rows written before this field existed.
	LocalSizeInBytes int64        `json:"localSizeInBytes,omitempty"`
	State            SegmentState `json:"state"`
	// BrokerID is the broker id of the tierd that wrote the row (-1 when
	// it had none).
	BrokerID int32 `json:"brokerId"`
	// InstanceID is the instance id of the tierd that made the copy (kept
	// in its metadata dir), "" for rows written before instance ids.
	InstanceID string `json:"instanceId,omitempty"`
	// CopyLeaderEpoch is the partition's leader epoch, as the Kafka
	// cluster gave it, under which the copy was made; nil without a
	// cluster.
	CopyLeaderEpoch *int32 `json:"copyLeaderEpoch,omitempty"`
	// Damaged says which of the copy's objects a check found missing from
	// the bucket ("" while none is). A damaged copy is no evidence for
	// deleting a local segment, and its segment is copied again while it
	// is still on local disk.
	Damaged string `json:"damaged,omitempty"`
	// TxnIndexPresent and ProducerSnapshotPresent say which optional
	// objects were uploaded.
	TxnIndexPresent         bool `json:"txnIndexPresent"`
	ProducerSnapshotPresent bool `json:"producerSnapshotPresent"`
	// Compacted says the copy was made from a segment of a topic whose
	// cleanup.policy includes compact, once the log cleaner had passed
	// it (below the partition's cleaner checkpoint): offsets may be
	// missing from it, and it holds at least the latest value of every
	// key in its range as of the copy. The local segment may be cleaned
	// again after the copy, so its size may differ from SizeInBytes.
	// false in rows written before this field existed (omitted when
	// false, so older rows read as not compacted).
	Compacted bool `json:"compacted,omitempty"`
	// CompactionOf lists, oldest first, the copies a remote compaction
	// merged into this one (their segment ids; package copier,
	// remotecompact.go); nil for a copy of a local segment.
	CompactionOf []SegmentID `json:"compactionOf,omitempty"`
	// Form is how the copy's objects are stored: "" as they came, or
	// FormChunked (chunks, compressed or encrypted; its manifest holds the
	// chunk index). Positions and SizeInBytes are always of the original
	// .log.
	Form string `json:"form,omitempty"`
	// StoredSizeInBytes is the size in bytes of the stored .log object of
	// a chunked copy; 0 otherwise.
	StoredSizeInBytes int64 `json:"storedSizeInBytes,omitempty"`
	// Encrypted says the copy's chunks are sealed (objects.encryption),
	// recorded from the manifest tierd wrote: a read refuses the copy if
	// its manifest in the bucket says otherwise.
	Encrypted bool `json:"encrypted,omitempty"`
}

// FormChunked is SegmentMetadata.Form of a copy in chunked form.
const FormChunked = "chunked"

// Contains reports whether offset lies in [StartOffset, EndOffset].
func (m SegmentMetadata) Contains(offset int64) bool {
	return offset >= m.StartOffset && offset <= m.EndOffset
}

// PartitionOffsets is what tierd keeps per partition besides its segments.
type PartitionOffsets struct {
	// TopicID is the topic id of the incarnation these offsets belong to
	// ("" when unknown): a re-created topic has a new one.
	TopicID string `json:"topicId,omitempty"`
	// LogStartOffset is the first offset of the whole log (remote and
	// local); it only moves forward, and moves before any data below it
	// is deleted.
	LogStartOffset int64 `json:"logStartOffset"`
	// HighestTieredOffset is the highest offset with a finished copy, or
	// -1 when nothing has been copied.
	HighestTieredOffset int64 `json:"highestTieredOffset"`
	// LocalLogStartOffset is the first offset still on local disk as tierd
	// last saw it (persisted before tierd deletes local files).
	LocalLogStartOffset int64 `json:"localLogStartOffset"`
	// OperatorKept is set when an operator restored this incarnation's
	// copies from a scheduled deletion ("tierd partitions restore": who
	// and when): from then on only an operator's order schedules their
	// deletion again, never the cluster's answer alone.
	OperatorKept string `json:"operatorKept,omitempty"`
}

// IndexType names a segment file other than the .log (Kafka's
// RemoteStorageManager.IndexType).
type IndexType int8

// Index types.
const (
	OffsetIndex IndexType = iota
	TimeIndex
	TransactionIndex
	ProducerSnapshot
	LeaderEpochIndex
)

// Suffix returns the object key suffix of the index type.
func (t IndexType) Suffix() string {
	switch t {
	case OffsetIndex:
		return kafkalog.IndexSuffix
	case TimeIndex:
		return kafkalog.TimeIndexSuffix
	case TransactionIndex:
		return kafkalog.TxnIndexSuffix
	case ProducerSnapshot:
		return kafkalog.SnapshotSuffix
	case LeaderEpochIndex:
		return ".leader-epoch-checkpoint"
	}
	return fmt.Sprintf(".unknown-%d", int8(t))
}

// String returns the index type's name.
func (t IndexType) String() string {
	return [...]string{"OFFSET", "TIMESTAMP", "TRANSACTION", "PRODUCER_SNAPSHOT", "LEADER_EPOCH"}[t]
}

// Newer orders copies of the same offsets: an undamaged copy before a
// damaged one, then the later event (EventTimestampMs), then the larger
// id. It reports whether a is the newer of a and b.
func Newer(a, b *SegmentMetadata) bool {
	if (a.Damaged == "") != (b.Damaged == "") {
		return a.Damaged == ""
	}
	if a.EventTimestampMs != b.EventTimestampMs {
		return a.EventTimestampMs > b.EventTimestampMs
	}
	return bytes.Compare(a.ID[:], b.ID[:]) > 0
}

// Before is Supersede's order of finished rows: start offset ascending,
// then end offset descending (a row before the rows it covers), then the
// newest copy of a range first (see Newer). It reports whether a comes
// before b; rows with distinct ids are never equal.
func Before(a, b *SegmentMetadata) bool {
	if a.StartOffset != b.StartOffset {
		return a.StartOffset < b.StartOffset
	}
	if a.EndOffset != b.EndOffset {
		return a.EndOffset > b.EndOffset
	}
	return Newer(a, b)
}

// Supersede drops, from finished rows, each one whose whole range a newer
// row covers, and returns the rest in Before's order (by start offset).
// Partly overlapping rows are both kept: they hold the same offsets of
// the same log. It runs in O(n log n) for rows that do not nest.
func Supersede(fin []SegmentMetadata) []SegmentMetadata {
	rows := append([]SegmentMetadata(nil), fin...)
	sort.Slice(rows, func(i, j int) bool { return Before(&rows[i], &rows[j]) })
	kept := rows[:0]
	var open []SegmentMetadata // earlier rows that may still cover later ones
	for i, r := range rows {
		if i > 0 && rows[i-1].StartOffset == r.StartOffset && rows[i-1].EndOffset == r.EndOffset {
			continue // an older copy of exactly the same range
		}
		live := open[:0]
		covered := false
		for _, o := range open {
			if o.EndOffset < r.StartOffset {
				continue // ends before r: covers nothing from here on
			}
			live = append(live, o)
			covered = covered || (o.EndOffset >= r.EndOffset && Newer(&o, &r))
		}
		open = append(live, r)
		if !covered {
			kept = append(kept, r)
		}
	}
	return kept
}
