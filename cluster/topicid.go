package cluster

import (
	"encoding/base64"
	"fmt"

	"github.com/tierd/tierd/internal/kafkalog"
)

// TopicIDLen is the length of a topic id's text form.
const TopicIDLen = 22

// topicIDEncoding is Kafka's Uuid.toString: base64url without padding
// (java.util.Base64.getUrlEncoder().withoutPadding()). Strict rejects
// non-zero bits in the last character, so each id has one spelling.
var topicIDEncoding = base64.RawURLEncoding.Strict()

// FormatTopicID returns the text form of a 16-byte topic id as Kafka
// writes it in partition.metadata ("topic_id: <22 chars>") and in its
// tools: base64url without padding, most significant byte first. The
// zero id (Kafka's "no id") is returned as "".
func FormatTopicID(id [16]byte) string {
	if id == ([16]byte{}) {
		return ""
	}
	return topicIDEncoding.EncodeToString(id[:])
}

// ParseTopicID parses the text form FormatTopicID writes: exactly 22
// base64url characters without padding, decoding to 16 bytes. Kafka's
// reserved ids (all zero, "no id"; and 1, the KRaft metadata topic
// __cluster_metadata, both in Kafka's Uuid.RESERVED) are refused: no
// user topic has them, and asking a cluster about them proves nothing.
// The error wraps ErrBadTopicID.
func ParseTopicID(s string) ([16]byte, error) {
	id, err := kafkalog.ParseTopicID(s)
	if err != nil {
		return [16]byte{}, fmt.Errorf("%w: %v", ErrBadTopicID, err)
	}
	if id == ([16]byte{15: 1}) {
		return [16]byte{}, fmt.Errorf("%w: %q is one of Kafka's reserved ids", ErrBadTopicID, s)
	}
	return id, nil
}
