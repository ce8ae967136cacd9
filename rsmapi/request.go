package rsmapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/tierd/tierd/internal/remotelog"
)

// maxJSONBytes bounds a JSON request body (and the JSON head of a copy
// by upload).
const maxJSONBytes = 1 << 20

// maxTopicLen is Kafka's longest topic name.
const maxTopicLen = 249

// copyName is a copy as its address C names it: the partition, the
// segment's start offset and the copy's segment id.
type copyName struct {
	tp    remotelog.TopicPartition
	start int64
	id    remotelog.SegmentID
}

func (c copyName) String() string {
	return fmt.Sprintf("%s segment %d copy %s", c.tp, c.start, c.id)
}

// meta is the row fields the name gives; the rest are zero.
func (c copyName) meta() remotelog.SegmentMetadata {
	return remotelog.SegmentMetadata{TopicPartition: c.tp, StartOffset: c.start, ID: c.id}
}

// parseName reads C's four values from the request's path: a topic name
// of Kafka's characters, a partition and a start offset in canonical
// decimal (no sign, no leading zeros), and a segment id as Kafka prints
// a Uuid. Errors: ErrInvalid naming the value.
func parseName(r *http.Request) (copyName, error) {
	var c copyName
	topic := r.PathValue("topic")
	if err := checkTopic(topic); err != nil {
		return c, err
	}
	p, err := canonicalInt(r.PathValue("partition"), math.MaxInt32)
	if err != nil {
		return c, invalidf("partition %q: %v", r.PathValue("partition"), err)
	}
	start, err := canonicalInt(r.PathValue("start"), math.MaxInt64)
	if err != nil {
		return c, invalidf("start offset %q: %v", r.PathValue("start"), err)
	}
	id, err := parseUUID(r.PathValue("id"))
	if err != nil {
		return c, invalidf("segment id %q: %v", r.PathValue("id"), err)
	}
	c.tp = remotelog.TopicPartition{Topic: topic, Partition: int32(p)}
	c.start, c.id = start, id
	return c, nil
}

// checkTopic applies Kafka's rules for topic names.
func checkTopic(topic string) error {
	switch {
	case topic == "":
		return invalidf("empty topic")
	case len(topic) > maxTopicLen:
		return invalidf("topic of %d characters, more than Kafka's %d", len(topic), maxTopicLen)
	case topic == "." || topic == "..":
		return invalidf("topic %q", topic)
	}
	for _, r := range topic {
		if !topicChar(r) {
			return invalidf("topic %q: Kafka allows only a-z, A-Z, 0-9, '.', '_' and '-'", topic)
		}
	}
	return nil
}

// canonicalInt parses a decimal in [0, limit] written without sign or
// leading zeros, so that one value has one spelling (and one key).
func canonicalInt(s string, limit int64) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > limit || strconv.FormatInt(v, 10) != s {
		return 0, fmt.Errorf("want a decimal from 0 to %d without sign or leading zeros", limit)
	}
	return v, nil
}

// parseUUID parses a Uuid as Kafka prints it (22 characters of URL-safe
// base64 without padding), refusing spellings that do not print back the
// same: the key holds the printed form.
func parseUUID(s string) (remotelog.SegmentID, error) {
	id, err := remotelog.ParseSegmentID(s)
	if err != nil {
		return id, errors.New("want 22 characters of URL-safe base64 without padding, as Kafka prints a Uuid")
	}
	if id.String() != s {
		return id, errors.New("not the canonical spelling of its 16 bytes")
	}
	return id, nil
}

// epochJSON is one entry of segmentLeaderEpochs.
type epochJSON struct {
	Epoch       *int32 `json:"epoch"`
	StartOffset *int64 `json:"startOffset"`
}

// copyRequest is the JSON of a copy (by path, or the head of a copy by
// upload, which has the sizes instead of the paths). Unknown fields are
// ignored, so that a newer plugin's additions do not break an older
// tierd.
type copyRequest struct {
	TopicID               string      `json:"topicId"`
	EndOffset             *int64      `json:"endOffset"`
	MaxTimestampMs        int64       `json:"maxTimestampMs"`
	EventTimestampMs      int64       `json:"eventTimestampMs"`
	BrokerID              *int32      `json:"brokerId"`
	SegmentSizeInBytes    *int64      `json:"segmentSizeInBytes"`
	SegmentLeaderEpochs   []epochJSON `json:"segmentLeaderEpochs"`
	LeaderEpochCheckpoint *string     `json:"leaderEpochCheckpoint"`

	LogSegment       string  `json:"logSegment"`
	OffsetIndex      string  `json:"offsetIndex"`
	TimeIndex        string  `json:"timeIndex"`
	TransactionIndex *string `json:"transactionIndex"`
	ProducerSnapshot *string `json:"producerSnapshot"`

	LogSegmentBytes       *int64 `json:"logSegmentBytes"`
	OffsetIndexBytes      *int64 `json:"offsetIndexBytes"`
	TimeIndexBytes        *int64 `json:"timeIndexBytes"`
	TransactionIndexBytes *int64 `json:"transactionIndexBytes"`
	ProducerSnapshotBytes *int64 `json:"producerSnapshotBytes"`
}

// copySpec is a checked copy request.
type copySpec struct {
	name       copyName
	topicID    string
	end        int64 // inclusive
	maxTs      int64
	brokerID   int32
	size       int64 // segmentSizeInBytes
	epochs     []remotelog.EpochEntry
	checkpoint []byte
}

// decodeJSON decodes one JSON object from r, at most maxJSONBytes, and
// nothing after it.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: a JSON body of more than %d bytes", ErrTooLarge, maxJSONBytes)
		}
		return invalidf("body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidf("body: more after the JSON object")
	}
	return nil
}

// spec checks the request's metadata for the copy named c. Errors:
// ErrInvalid naming the field.
func (q *copyRequest) spec(c copyName) (copySpec, error) {
	s := copySpec{name: c, maxTs: q.MaxTimestampMs, brokerID: -1}
	if _, err := parseUUID(q.TopicID); err != nil {
		return s, invalidf("topicId %q: %v", q.TopicID, err)
	}
	s.topicID = q.TopicID
	if q.EndOffset == nil || *q.EndOffset < c.start {
		return s, invalidf("endOffset must be given and at least the start offset %d (both inclusive)", c.start)
	}
	s.end = *q.EndOffset
	if q.SegmentSizeInBytes == nil || *q.SegmentSizeInBytes < 0 || *q.SegmentSizeInBytes > math.MaxInt32 {
		return s, invalidf("segmentSizeInBytes must be given, from 0 to %d", math.MaxInt32)
	}
	s.size = *q.SegmentSizeInBytes
	if q.BrokerID != nil {
		s.brokerID = *q.BrokerID
	}
	if len(q.SegmentLeaderEpochs) == 0 {
		return s, invalidf("segmentLeaderEpochs must not be empty (Kafka's RemoteLogSegmentMetadata requires an epoch)")
	}
	for i, e := range q.SegmentLeaderEpochs {
		if e.Epoch == nil || e.StartOffset == nil || *e.Epoch < 0 || *e.StartOffset < 0 {
			return s, invalidf("segmentLeaderEpochs[%d]: epoch and startOffset must be given and not negative", i)
		}
		if i > 0 && (*e.Epoch <= s.epochs[i-1].Epoch || *e.StartOffset < s.epochs[i-1].StartOffset) {
			return s, invalidf("segmentLeaderEpochs[%d]: epochs must increase and their start offsets not decrease", i)
		}
		if *e.StartOffset > s.end {
			return s, invalidf("segmentLeaderEpochs[%d]: start offset %d past the end offset %d", i, *e.StartOffset, s.end)
		}
		s.epochs = append(s.epochs, remotelog.EpochEntry{Epoch: *e.Epoch, StartOffset: *e.StartOffset})
	}
	if q.LeaderEpochCheckpoint == nil {
		return s, invalidf("leaderEpochCheckpoint must be given: the base64 of LogSegmentData.leaderEpochIndex's bytes")
	}
	cp, err := base64.StdEncoding.DecodeString(*q.LeaderEpochCheckpoint)
	if err != nil {
		return s, invalidf("leaderEpochCheckpoint: not standard base64: %v", err)
	}
	s.checkpoint = cp
	return s, nil
}

// customMetadata is the copy's RemoteLogSegmentMetadata.CustomMetadata,
// as the package doc lays it out: 't', layout version 1, flags.
func customMetadata(txn, snapshot bool) []byte {
	var flags byte
	if txn {
		flags |= 1
	}
	if snapshot {
		flags |= 2
	}
	return []byte{'t', 1, flags}
}

// copyAnswer is the body of a successful copy.
type copyAnswer struct {
	CustomMetadata []byte `json:"customMetadata"` // standard base64
	Bytes          int64  `json:"bytes"`
}
