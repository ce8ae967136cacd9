package batch

import (
	"testing"
)

// TestSetMaxTimestamp: a CreateTime batch becomes a LogAppendTime batch
// with the given max timestamp and a valid CRC; its records keep their
// create-time deltas (baseTimestamp unchanged) but read back with the
// append time, as Kafka's DefaultRecordBatch gives them.
func TestSetMaxTimestamp(t *testing.T) {
	recs := []Record{{Key: []byte("a"), Value: []byte("1"), Timestamp: 1000}, {Key: []byte("b"), Value: []byte("2"), Timestamp: 1500}}
	for _, c := range []Codec{CodecNone, CodecGzip} {
		p := NewParams(7, 3)
		p.Codec, p.TimestampType = c, LogAppendTime
		buf, err := AppendBatch(nil, p, recs, Stdlib)
		if err != nil {
			t.Fatal(err)
		}
		if err := SetMaxTimestamp(buf, LogAppendTime, 99999); err != nil {
			t.Fatal(err)
		}
		if !CheckCRC(buf) {
			t.Fatalf("%s: CRC not updated", c)
		}
		b, err := ParseHeader(buf, 0)
		if err != nil {
			t.Fatal(err)
		}
		if b.TimestampType != LogAppendTime || b.MaxTimestamp != 99999 || b.FirstTimestamp != 1000 || b.Codec != c {
			t.Fatalf("%s: header %+v", c, b)
		}
		got, err := Records(buf, Stdlib)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			if r.Timestamp != 99999 {
				t.Fatalf("%s: record %d timestamp %d, want the append time", c, r.Offset, r.Timestamp)
			}
		}
		// Back to CreateTime: the records' own timestamps again.
		if err := SetMaxTimestamp(buf, CreateTime, 1500); err != nil {
			t.Fatal(err)
		}
		if got, err = Records(buf, Stdlib); err != nil || got[0].Timestamp != 1000 || got[1].Timestamp != 1500 || !CheckCRC(buf) {
			t.Fatalf("%s: CreateTime again: %+v %v", c, got, err)
		}
	}
	if err := SetMaxTimestamp(make([]byte, 30), LogAppendTime, 1); err == nil {
		t.Fatal("short entry accepted")
	}
}
