package remotelog

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCompactedRowJSON: a row written before the compacted field existed
// (as Pebble holds it) reads as not compacted; a compacted row keeps the
// flag through JSON, and a row that is not compacted writes no field, so
// the rows of topics that are not compacted stay as they were.
func TestCompactedRowJSON(t *testing.T) {
	old := `{"topicPartition":{"topic":"t","partition":0},"segmentId":"hAsKN8hBQkWOMo03MrFmWA","startOffset":0,"endOffset":9,` +
		`"maxTimestampMs":5,"eventTimestampMs":6,"segmentLeaderEpochs":null,"segmentSizeInBytes":100,"state":"COPY_SEGMENT_FINISHED","brokerId":0,` +
		`"txnIndexPresent":false,"producerSnapshotPresent":false}`
	var m SegmentMetadata
	if err := json.Unmarshal([]byte(old), &m); err != nil {
		t.Fatal(err)
	}
	if m.Compacted || m.SizeInBytes != 100 {
		t.Fatalf("old row read as %+v", m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "compacted") {
		t.Fatalf("a row that is not compacted writes the field: %s", out)
	}
	m.Compacted = true
	out, _ = json.Marshal(m)
	var back SegmentMetadata
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Compacted {
		t.Fatalf("compacted lost: %s", out)
	}
}
