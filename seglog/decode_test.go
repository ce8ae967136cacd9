package seglog

import (
	"bytes"
	"testing"
)

// TestDecodeRecords: what Read returns decodes, outside the module too
// (seglog.DecodeRecords), into the records appended: a zstd topic, a
// tombstone, a transaction whose marker is skipped; a flipped byte is a
// CRC error.
func TestDecodeRecords(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CompressionType = CompressionZstd
	l := mustOpen(t, partitionDir(t, "decode-0"), cfg)
	defer l.Close()
	want := []Record{
		{Key: []byte("a"), Value: []byte("1"), Timestamp: 1000, Headers: []RecordHeader{{Key: "h", Value: []byte("v")}}},
		{Key: []byte("b"), Value: nil, Timestamp: 1001},
	}
	if _, err := l.AppendBatch(CodecGzip, want...); err != nil {
		t.Fatal(err)
	}
	txn := Record{Key: []byte("c"), Value: []byte("2"), Timestamp: 1002}
	if _, err := l.AppendTransactional(7, 0, txn); err != nil {
		t.Fatal(err)
	}
	if _, err := l.EndTransaction(7, 0, true); err != nil {
		t.Fatal(err)
	}
	want = append(want, txn)
	data, err := l.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRecords(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("decoded %d records, want %d (the marker skipped)", len(got), len(want))
	}
	for i, r := range got {
		w := want[i]
		if r.Offset != int64(i) || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) ||
			r.Timestamp != w.Timestamp || len(r.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %+v, want %+v", i, r, w)
		}
	}
	bad := append([]byte(nil), data...)
	bad[len(bad)-1] ^= 0xff
	if _, err := DecodeRecords(bad); err == nil {
		t.Fatal("a flipped byte decoded")
	}
}
