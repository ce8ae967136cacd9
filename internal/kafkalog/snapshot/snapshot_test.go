package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// TestRealSnapshots parses every producer snapshot a real broker wrote in
// the fixtures: all of them hold no producer (as PROVENANCE.md records),
// with a valid CRC, and Append writes them back byte for byte.
func TestRealSnapshots(t *testing.T) {
	dir := testfixtures.Dir(t)
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, kafkalog.SnapshotSuffix) {
			return err
		}
		n++
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := Parse(data)
		if err != nil || len(entries) != 0 {
			t.Errorf("%s: %d entries, %v", p, len(entries), err)
		}
		if !bytes.Equal(Append(nil, entries), data) {
			t.Errorf("%s: Append gives %x, the broker wrote %x", p, Append(nil, entries), data)
		}
		return nil
	})
	if n != 12 {
		t.Errorf("%d snapshot files in the fixtures, PROVENANCE.md lists 12", n)
	}
}

var sample = []Entry{
	{ProducerID: 1000, ProducerEpoch: 3, LastSequence: 41, LastOffset: 812, OffsetDelta: 9, Timestamp: 1700000000123, CoordinatorEpoch: 7, CurrentTxnFirstOffset: 800},
	{ProducerID: 1001, ProducerEpoch: 0, LastSequence: 2, LastOffset: -1, OffsetDelta: 5, Timestamp: -1, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
}

// TestLayout checks the fields' byte positions against Kafka's schema
// (version, crc, count, then per entry producer_id, epoch, last_sequence,
// last_offset, offset_delta, timestamp, coordinator_epoch,
// current_txn_first_offset) and reads them back.
func TestLayout(t *testing.T) {
	data := Append(nil, sample)
	if len(data) != 10+2*46 {
		t.Fatalf("%d bytes", len(data))
	}
	be := binary.BigEndian
	if be.Uint16(data) != 1 || be.Uint32(data[6:]) != 2 || be.Uint64(data[10:]) != 1000 || be.Uint16(data[18:]) != 3 ||
		be.Uint32(data[20:]) != 41 || be.Uint64(data[24:]) != 812 || be.Uint32(data[32:]) != 9 || be.Uint64(data[36:]) != 1700000000123 ||
		be.Uint32(data[44:]) != 7 || be.Uint64(data[48:]) != 800 || be.Uint64(data[56:]) != 1001 {
		t.Fatalf("layout: %x", data)
	}
	got, err := Parse(data)
	if err != nil || !reflect.DeepEqual(got, sample) {
		t.Fatalf("Parse: %+v, %v", got, err)
	}
	if fs := got[0].FirstSequence(); fs != 32 {
		t.Errorf("first sequence %d, want 32", fs)
	}
	if fs := got[1].FirstSequence(); fs != math.MaxInt32-2 {
		t.Errorf("first sequence wrapping below 0: %d, want %d", fs, math.MaxInt32-2)
	}
}

func TestCorrupt(t *testing.T) {
	good := Append(nil, sample)
	mutate := func(f func([]byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, tc := range map[string]struct {
		data    []byte
		pos     int64
		entries int
		reason  string
	}{
		"flipped byte":   {mutate(func(b []byte) []byte { b[30] ^= 1; return b }), 2, 2, "CRC"},
		"version 2":      {mutate(func(b []byte) []byte { b[1] = 2; return b }), 0, 0, "version 2"},
		"truncated":      {good[:len(good)-1], int64(len(good) - 1), 0, "room for 1"},
		"short header":   {good[:7], 7, 0, "truncated"},
		"trailing bytes": {append(bytes.Clone(good), 0), int64(len(good)), 2, "1 bytes after"},
		"negative count": {mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[6:], 0xfffffff0); return b }), 6, 0, "entry count"},
	} {
		entries, err := Parse(tc.data)
		var ce *kafkalog.CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, kafkalog.ErrCorrupt) || ce.Position != tc.pos || len(entries) != tc.entries || !strings.Contains(ce.Reason, tc.reason) {
			t.Errorf("%s: %d entries, %v; want position %d, %d entries, %q", name, len(entries), err, tc.pos, tc.entries, tc.reason)
		}
	}
}

// FuzzParse: Parse never panics, and what it accepts Append writes back
// byte for byte.
func FuzzParse(f *testing.F) {
	f.Add(Append(nil, nil))
	f.Add(Append(nil, sample))
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Parse(data)
		if err != nil {
			return
		}
		if binary.BigEndian.Uint32(data[6:]) == math.MaxUint32 {
			return // a null array: read as none, written as 0
		}
		if !bytes.Equal(Append(nil, entries), data) {
			t.Fatalf("accepted %x, writes back %x", data, Append(nil, entries))
		}
	})
}
