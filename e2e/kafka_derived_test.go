package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// deriveFixtures writes, into a log dir of its own, the cases the real
// fixtures lack (see their PROVENANCE.md), and returns it with the entry
// index at which each partition is split for tiering:
//
//   - compacted gaps, from real bytes: the magic-1 partitions foo-0,
//     TEST-TOPIC-0 and __consumer_offsets-40 of xpx-kafka0101-magic1 with
//     what Kafka's log cleaner removes taken out of their older two thirds
//     (every message whose key comes again later); the messages kept are
//     the broker's bytes at their own offsets, so the offsets have gaps,
//     and the split falls where the cleaned part ends (the tiered segment
//     may end in a gap);
//   - magic 0 (no public magic-0 log was found): "legacy-v0-0", written
//     here: plain messages, a null key, a null value, and a gzip wrapper
//     whose inner messages carry absolute offsets as 0.8 brokers wrote
//     them.
func deriveFixtures(t *testing.T, root string) (*fixtureSet, map[string]int) {
	t.Helper()
	dir := t.TempDir()
	cuts := map[string]int{}
	for _, name := range []string{"foo-0", "TEST-TOPIC-0", "__consumer_offsets-40"} {
		entries := readEntries(t, testfixtures.Path(t, "xpx-kafka0101-magic1", "tmp", "kafka-logs", name, kafkalog.FileName(0, kafkalog.LogSuffix)))
		kept, cut := cleaned(entries)
		var data []byte
		for _, e := range kept {
			data = append(data, e.raw...)
		}
		pdir := filepath.Join(dir, name)
		writeFile(t, filepath.Join(pdir, kafkalog.FileName(0, kafkalog.LogSuffix)), data)
		cuts[pdir] = cut
	}
	writeFile(t, filepath.Join(dir, "legacy-v0-0", kafkalog.FileName(0, kafkalog.LogSuffix)), legacyV0Log(t))
	return &fixtureSet{name: "derived", src: dir}, cuts
}

// cleaned returns the entries the log cleaner keeps when it cleans the
// older two thirds of a log of single-message entries (a message whose key
// comes again later goes; null keys and the uncleaned rest stay), and how
// many of the kept ones are cleaned.
func cleaned(entries []fentry) ([]fentry, int) {
	lastOf := map[string]int64{}
	for _, e := range entries {
		for _, r := range e.recs {
			if r.Key != nil {
				lastOf[string(r.Key)] = r.Offset
			}
		}
	}
	dirty := 2 * len(entries) / 3
	var kept []fentry
	for i, e := range entries {
		gone := i < dirty && len(e.recs) == 1 && e.recs[0].Key != nil && lastOf[string(e.recs[0].Key)] > e.recs[0].Offset
		if !gone {
			kept = append(kept, e)
		}
	}
	return kept, max(len(kept)-(len(entries)-dirty), 1)
}

// v0Message appends one magic-0 message (a 0.8 MessageSet entry): offset,
// size, CRC-32 (IEEE) over magic..end, magic 0, attributes (the codec),
// key and value with int32 lengths (-1 for null).
func v0Message(dst []byte, offset int64, codec int8, key, value []byte) []byte {
	body := []byte{0, byte(codec)}
	for _, b := range [][]byte{key, value} {
		if b == nil {
			body = binary.BigEndian.AppendUint32(body, 0xffffffff)
			continue
		}
		body = binary.BigEndian.AppendUint32(body, uint32(len(b)))
		body = append(body, b...)
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+len(body)))
	dst = binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(body))
	return append(dst, body...)
}

// legacyV0Log is a magic-0 log: offsets 0-9 plain (a null key at 3, a
// null value at 5), 10-14 in one gzip wrapper (offset 14), 15-19 plain.
func legacyV0Log(t *testing.T) []byte {
	t.Helper()
	kv := func(off int64) ([]byte, []byte) {
		k, v := []byte(fmt.Sprintf("v0-key-%d", off%7)), []byte(fmt.Sprintf("magic 0 message at offset %d", off))
		switch off {
		case 3:
			k = nil
		case 5:
			v = nil
		}
		return k, v
	}
	var log []byte
	for off := int64(0); off < 10; off++ {
		k, v := kv(off)
		log = v0Message(log, off, 0, k, v)
	}
	var inner []byte
	for off := int64(10); off < 15; off++ {
		k, v := kv(off)
		inner = v0Message(inner, off, 0, k, v)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(inner); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	log = v0Message(log, 14, 1, nil, gz.Bytes())
	for off := int64(15); off < 20; off++ {
		k, v := kv(off)
		log = v0Message(log, off, 0, k, v)
	}
	return log
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
