package cluster

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

func TestFormatParseTopicID(t *testing.T) {
	var ff, seq [16]byte
	for i := range ff {
		ff[i], seq[i] = 0xff, byte(i)
	}
	for _, tc := range []struct {
		raw  [16]byte
		text string
	}{
		// 126 one bits are 21 '_' (63); the last two and four zero
		// padding bits are 110000 = 48, 'w'.
		{ff, "_____________________w"},
		// 00 01 02 -> 000000 000000 000100 000010 = "AAEC", and so on.
		{seq, "AAECAwQFBgcICQoLDA0ODw"},
	} {
		if got := FormatTopicID(tc.raw); got != tc.text {
			t.Errorf("FormatTopicID(%x) = %q, want %q", tc.raw, got, tc.text)
		}
		got, err := ParseTopicID(tc.text)
		if err != nil || got != tc.raw {
			t.Errorf("ParseTopicID(%q) = %x, %v; want %x", tc.text, got, err, tc.raw)
		}
	}
	if FormatTopicID([16]byte{}) != "" {
		t.Error("the zero id (Kafka's no id) must format as empty")
	}
	for _, bad := range []string{
		"",
		"AAECAwQFBgcICQoLDA0OD",    // 21 characters
		"AAECAwQFBgcICQoLDA0ODw==", // padded, as Java's decoder would accept
		"AAECAwQFBgcICQoLDA0ODwA",  // 23 characters
		"AAECAwQFBgcICQoLDA0OD+",   // standard base64, not url-safe
		"AAECAwQFBgcICQoLDA0OD/",
		"_____________________x", // non-zero padding bits: a second spelling of ff..ff
		"AAAAAAAAAAAAAAAAAAAAAA", // Uuid.ZERO_UUID
		"AAAAAAAAAAAAAAAAAAAAAQ", // Uuid.METADATA_TOPIC_ID
	} {
		if _, err := ParseTopicID(bad); !errors.Is(err, ErrBadTopicID) {
			t.Errorf("ParseTopicID(%q): %v, want ErrBadTopicID", bad, err)
		}
	}
}

// A real KRaft broker (Kafka 3.7.0) wrote each topic's id twice: as 16
// raw bytes in the TopicRecord of its metadata log, and as text in each
// partition's partition.metadata. The conversion must map one onto the
// other.
func TestTopicIDMatchesRealBroker(t *testing.T) {
	dir := testfixtures.Path(t, "ldi-kafka370-kraft")
	records := topicRecords(t, filepath.Join(dir, "__cluster_metadata-0", "00000000000000000000.log"))
	checked := 0
	for _, part := range []string{"TestTopicPatient-0", "Retry.TestTopicPatient-0", "__consumer_offsets-6"} {
		tp, ok := kafkalog.ParsePartitionDir(part)
		if !ok {
			t.Fatalf("parse %s", part)
		}
		text, err := kafkalog.ReadTopicID(filepath.Join(dir, part))
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := records[tp.Topic]
		if !ok {
			t.Fatalf("no TopicRecord for %s in the metadata log (have %d topics)", tp.Topic, len(records))
		}
		if got := FormatTopicID(raw); got != text {
			t.Errorf("%s: TopicRecord id %x formats as %q, partition.metadata says %q", tp.Topic, raw, got, text)
		}
		if got, err := ParseTopicID(text); err != nil || got != raw {
			t.Errorf("%s: ParseTopicID(%q) = %x, %v; TopicRecord has %x", tp.Topic, text, got, err, raw)
		}
		checked++
	}
	// The metadata topic's own partition.metadata holds the reserved id.
	text, err := kafkalog.ReadTopicID(filepath.Join(dir, "__cluster_metadata-0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseTopicID(text); !errors.Is(err, ErrBadTopicID) {
		t.Errorf("__cluster_metadata id %q: %v, want refused as reserved", text, err)
	}
	if checked != 3 {
		t.Errorf("checked %d topics", checked)
	}
}

// topicRecords reads the TopicRecords (metadata record api key 2, version
// 0: compact string name, uuid) of a KRaft metadata log: each record
// value is a frame version, api key and record version as unsigned
// varints, then the record (Kafka's MetadataRecordSerde).
func topicRecords(t *testing.T, path string) map[string][16]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][16]byte{}
	s := batch.NewScanner(f, st.Size(), batch.ScanOptions{VerifyCRC: true})
	for s.Next() {
		if !s.CRCValid() {
			t.Fatalf("bad CRC at %d", s.Batch().Position)
		}
		if s.Batch().Control {
			continue
		}
		raw, err := s.Raw()
		if err != nil {
			t.Fatal(err)
		}
		recs, err := batch.Records(raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			v := r.Value
			var head [3]uint64
			for i := range head {
				n, w := binary.Uvarint(v)
				if w <= 0 {
					t.Fatalf("offset %d: bad record header", r.Offset)
				}
				head[i], v = n, v[w:]
			}
			if head[0] != 1 || head[1] != 2 || head[2] != 0 {
				continue // not a TopicRecord v0
			}
			n, w := binary.Uvarint(v)
			if w <= 0 || n == 0 || uint64(len(v)-w) < n-1+16 {
				t.Fatalf("offset %d: bad TopicRecord", r.Offset)
			}
			name := string(v[w : w+int(n-1)])
			var id [16]byte
			copy(id[:], v[w+int(n-1):])
			out[name] = id
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
