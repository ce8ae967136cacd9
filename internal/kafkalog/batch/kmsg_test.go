package batch_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// compareWithKmsg decodes one whole entry with both our code and franz-go's
// kmsg and reports any difference in header fields or uncompressed records.
func compareWithKmsg(raw []byte) error {
	b, err := batch.ParseHeader(raw, 0)
	if err != nil {
		return fmt.Errorf("ours: %w", err)
	}
	if b.Magic != 2 {
		var m kmsg.MessageV1
		if err := m.ReadFrom(raw); err != nil {
			return fmt.Errorf("kmsg: %w", err)
		}
		if m.Offset != b.LastOffset || m.Magic != b.Magic || uint32(m.CRC) != b.CRC || int16(m.Attributes) != b.Attributes {
			return fmt.Errorf("legacy header differs: kmsg %+v, ours %+v", m, b)
		}
		if b.Magic == 1 && m.Timestamp != b.MaxTimestamp {
			return fmt.Errorf("legacy timestamp: kmsg %d ours %d", m.Timestamp, b.MaxTimestamp)
		}
		return nil
	}
	var k kmsg.RecordBatch
	if err := k.ReadFrom(raw); err != nil {
		return fmt.Errorf("kmsg: %w", err)
	}
	switch {
	case k.FirstOffset != b.BaseOffset, int64(k.Length)+12 != int64(b.Size),
		k.PartitionLeaderEpoch != b.PartitionLeaderEpoch, k.Magic != b.Magic,
		uint32(k.CRC) != b.CRC, k.Attributes != b.Attributes,
		k.FirstOffset+int64(k.LastOffsetDelta) != b.LastOffset,
		k.FirstTimestamp != b.FirstTimestamp, k.MaxTimestamp != b.MaxTimestamp,
		k.ProducerID != b.ProducerID, k.ProducerEpoch != b.ProducerEpoch,
		k.FirstSequence != b.BaseSequence, k.NumRecords != b.Count:
		return fmt.Errorf("header differs: kmsg %+v, ours %+v", k, b)
	}
	// Records: decompress with our codec, then walk them with kmsg.Record.
	ours, err := batch.Records(raw, codec.Kafka)
	if err != nil {
		return fmt.Errorf("ours records: %w", err)
	}
	payload := k.Records
	if b.Codec != batch.CodecNone {
		if payload, err = codec.Kafka.Decompress(b.Codec, payload, batch.MaxDecompressed); err != nil {
			return err
		}
	}
	for i := 0; len(payload) > 0; i++ {
		var r kmsg.Record
		if err := r.ReadFrom(payload); err != nil {
			return fmt.Errorf("kmsg record %d: %w", i, err)
		}
		_, n := binary.Varint(payload)
		payload = payload[n+int(r.Length):]
		if i >= len(ours) {
			return fmt.Errorf("kmsg sees more than our %d records", len(ours))
		}
		o := ours[i]
		ts := k.FirstTimestamp + r.TimestampDelta64
		if b.TimestampType == batch.LogAppendTime {
			ts = k.MaxTimestamp
		}
		if o.Offset != k.FirstOffset+int64(r.OffsetDelta) || o.Timestamp != ts ||
			!bytes.Equal(o.Key, r.Key) || (o.Key == nil) != (r.Key == nil) ||
			!bytes.Equal(o.Value, r.Value) || (o.Value == nil) != (r.Value == nil) || len(o.Headers) != len(r.Headers) {
			return fmt.Errorf("record %d differs: kmsg %+v, ours %+v", i, r, o)
		}
		for j, h := range r.Headers {
			if o.Headers[j].Key != h.Key || !bytes.Equal(o.Headers[j].Value, h.Value) {
				return fmt.Errorf("record %d header %d differs", i, j)
			}
		}
		if i == len(ours)-1 && len(payload) != 0 {
			return fmt.Errorf("kmsg sees bytes after our %d records", len(ours))
		}
	}
	return nil
}

// TestDifferentialKmsgFixtures decodes every entry of every real log with
// franz-go's kmsg as an independent decoder.
func TestDifferentialKmsgFixtures(t *testing.T) {
	root := testfixtures.Dir(t)
	n := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".log") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := batch.NewScanner(bytes.NewReader(data), int64(len(data)), batch.ScanOptions{})
		for s.Next() {
			b := s.Batch()
			if err := compareWithKmsg(data[b.Position:b.End()]); err != nil {
				t.Errorf("%s at byte %d: %v", p, b.Position, err)
			}
			n++
		}
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 50000 {
		t.Errorf("compared only %d entries", n)
	}
}

// TestDifferentialKmsgWritten checks batches we write, with every codec,
// through kmsg: the write side must produce what an independent reader
// expects.
func TestDifferentialKmsgWritten(t *testing.T) {
	recs := []batch.Record{
		{Timestamp: 1000, Value: []byte("v0")},
		{Timestamp: 999, Key: []byte("k1"), Value: nil},
		{Timestamp: 5000, Key: []byte{}, Value: bytes.Repeat([]byte("abc"), 40000),
			Headers: []batch.RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "", Value: nil}}},
	}
	for _, c := range []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		t.Run(c.String(), func(t *testing.T) {
			p := batch.NewParams(1234, 7)
			p.Codec = c
			raw, err := batch.AppendBatch(nil, p, recs, codec.Kafka)
			if err != nil {
				t.Fatal(err)
			}
			if !batch.CheckCRC(raw) {
				t.Fatal("CRC of written batch does not verify")
			}
			if err := compareWithKmsg(raw); err != nil {
				t.Fatal(err)
			}
			got, err := batch.Records(raw, codec.Kafka)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range got {
				if r.Offset != 1234+int64(i) || r.Timestamp != recs[i].Timestamp || !bytes.Equal(r.Value, recs[i].Value) {
					t.Errorf("record %d round trip: %+v", i, r)
				}
			}
			b, _ := batch.ParseHeader(raw, 0)
			if b.FirstTimestamp != 1000 || b.MaxTimestamp != 5000 || b.LastOffset != 1236 || b.Codec != c {
				t.Errorf("header %+v", b)
			}
		})
	}
}
