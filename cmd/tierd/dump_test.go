package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

func runCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func lines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var res []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		res = append(res, m)
	}
	return res
}

func TestDumpLog(t *testing.T) {
	p := testfixtures.Path(t, "kafka-go-fetch-captures/derived/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc/test-88-0/00000000000000000000.log")
	code, out, errOut := runCmd("dump", p)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	ls := lines(t, out)
	if len(ls) != 15 {
		t.Fatalf("%d lines, want 15", len(ls))
	}
	want := map[string]any{"baseOffset": 18.0, "lastOffset": 19.0, "count": 2.0, "magic": 1.0, "codec": "gzip",
		"timestampType": "CreateTime", "transactional": false, "control": false, "producerId": -1.0,
		"position": 1517.0, "size": 130.0, "crcValid": true}
	for k, v := range want {
		if ls[14][k] != v {
			t.Errorf("last line %s = %v, want %v", k, ls[14][k], v)
		}
	}
	for _, k := range []string{"firstTimestamp", "maxTimestamp"} {
		if _, ok := ls[14][k]; !ok {
			t.Errorf("missing %s", k)
		}
	}
	// A control batch from a KRaft metadata log.
	p = testfixtures.Path(t, "ldi-kafka370-kraft/__cluster_metadata-0/00000000000000000000.log")
	code, out, _ = runCmd("dump", p)
	ls = lines(t, out)
	if code != 0 || len(ls) != 4814 || ls[0]["control"] != true || ls[1]["control"] != false {
		t.Fatalf("exit %d, %d lines", code, len(ls))
	}
}

func TestDumpIndexes(t *testing.T) {
	dir := testfixtures.Path(t, "ldi-kafka370-kraft/__consumer_offsets-6")
	code, out, _ := runCmd("dump", filepath.Join(dir, "00000000000000000000.index"), filepath.Join(dir, "00000000000000000000.timeindex"))
	ls := lines(t, out)
	if code != 0 || len(ls) != 5 {
		t.Fatalf("exit %d, %d lines", code, len(ls))
	}
	if ls[0]["offset"] != 3.0 || ls[0]["position"] != 4730.0 || ls[1]["offset"] != 7.0 || ls[1]["position"] != 9571.0 {
		t.Errorf("index lines %v", ls[:2])
	}
	if ls[4]["offset"] != 12.0 || ls[4]["timestamp"] != 1769793578176.0 {
		t.Errorf("time index last line %v", ls[4])
	}
	// The all-zero preallocated index prints nothing and succeeds.
	code, out, _ = runCmd("dump", testfixtures.Path(t, "apache-kafka-pr-testdata/pr63/core/data/kafka-573957/test-topic-1/00000000000000000000.index"))
	if code != 0 || out != "" {
		t.Errorf("zero index: exit %d, %q", code, out)
	}
}

func TestDumpCorrupt(t *testing.T) {
	src := testfixtures.Path(t, "ldi-kafka370-kraft/__consumer_offsets-6/00000000000000000000.log")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Truncated inside the batch at 9571 (offset 7).
	trunc := filepath.Join(dir, "00000000000000000000.log")
	os.WriteFile(trunc, data[:9600], 0o644)
	code, out, errOut := runCmd("dump", trunc)
	if code != 1 || len(lines(t, out)) != 7 {
		t.Fatalf("truncated: exit %d, %d lines", code, len(lines(t, out)))
	}
	if !strings.Contains(errOut, trunc) || !strings.Contains(errOut, "byte 9571") {
		t.Errorf("error %q should name the file and byte 9571", errOut)
	}
	// A flipped byte: every batch printed, the bad one with crcValid false.
	flipped := filepath.Join(dir, "00000000000000000001.log")
	bad := bytes.Clone(data)
	bad[4730+70] ^= 1
	os.WriteFile(flipped, bad, 0o644)
	code, out, errOut = runCmd("dump", flipped)
	ls := lines(t, out)
	if code != 1 || len(ls) != 13 || ls[3]["crcValid"] != false || ls[2]["crcValid"] != true {
		t.Fatalf("flipped: exit %d, %d lines", code, len(ls))
	}
	if !strings.Contains(errOut, "byte 4730") || !strings.Contains(errOut, "CRC") {
		t.Errorf("error %q", errOut)
	}
	// A truncated index prints its whole entries, then the error.
	idx := filepath.Join(dir, "00000000000000000000.index")
	raw, _ := os.ReadFile(testfixtures.Path(t, "ldi-kafka370-kraft/__consumer_offsets-6/00000000000000000000.index"))
	os.WriteFile(idx, raw[:13], 0o644)
	code, out, errOut = runCmd("dump", idx)
	if code != 1 || len(lines(t, out)) != 1 || !strings.Contains(errOut, fmt.Sprintf("%s: corrupt data at byte 8", idx)) {
		t.Errorf("truncated index: exit %d, %q, %q", code, out, errOut)
	}
}

func TestDumpUsage(t *testing.T) {
	if code, _, _ := runCmd("dump"); code != 2 {
		t.Errorf("no files: exit %d", code)
	}
	p := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(p, []byte("x"), 0o644)
	if code, _, errOut := runCmd("dump", p); code != 1 || !strings.Contains(errOut, "not a segment file") {
		t.Errorf("unknown file: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCmd("dump", "/nonexistent/00000000000000000000.log"); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: exit %d %q", code, errOut)
	}
	if code, _, _ := runCmd("bogus"); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
}

// tenBatchLog returns ten one-record batches at offsets 0..9, 78 bytes each.
func tenBatchLog(t *testing.T) []byte {
	t.Helper()
	var log []byte
	for off := int64(0); off < 10; off++ {
		var err error
		if log, err = batch.AppendBatch(log, batch.NewParams(off, 0), []batch.Record{{Timestamp: 5, Value: []byte("0123456789")}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(log) != 780 {
		t.Fatalf("%d bytes", len(log))
	}
	return log
}

// TestDumpPreallocatedTail: zero bytes after the last batch are noted and
// are not an error; one non-zero byte there is, named by position.
func TestDumpPreallocatedTail(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "00000000000000000000.log")
	data := append(tenBatchLog(t), make([]byte, 4096)...)
	os.WriteFile(p, data, 0o644)
	code, out, errOut := runCmd("dump", p)
	if code != 0 || len(lines(t, out)) != 10 || !strings.Contains(errOut, "4096 zero bytes of preallocation after byte 780") {
		t.Fatalf("exit %d, %d lines, stderr %q", code, len(lines(t, out)), errOut)
	}
	data[780+2000] = 0x20
	os.WriteFile(p, data, 0o644)
	code, out, errOut = runCmd("dump", p)
	if code != 1 || len(lines(t, out)) != 10 || !strings.Contains(errOut, "first non-zero byte after it is at byte 2780") {
		t.Fatalf("exit %d, %d lines, stderr %q", code, len(lines(t, out)), errOut)
	}
}

// TestDumpHeaderRules: a batch whose base offset was changed (its CRC
// still valid) is printed and reported with its position; the next .log
// of the directory bounds the segment.
func TestDumpHeaderRules(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "00000000000000000000.log")
	good := tenBatchLog(t)
	bad := bytes.Clone(good)
	binary.BigEndian.PutUint64(bad[5*78:], 3)
	os.WriteFile(p, bad, 0o644)
	code, out, errOut := runCmd("dump", p)
	ls := lines(t, out)
	if code != 1 || len(ls) != 10 || ls[5]["crcValid"] != true || ls[5]["baseOffset"] != 3.0 {
		t.Fatalf("exit %d, %d lines", code, len(ls))
	}
	if !strings.Contains(errOut, p+": corrupt data at byte 390: batch at offset 3 is not after the previous entry's last offset 4") {
		t.Fatalf("stderr %q", errOut)
	}
	// Offsets 0..9 in a segment the next one starts at 9.
	os.WriteFile(p, good, 0o644)
	if code, _, _ := runCmd("dump", p); code != 0 {
		t.Fatalf("alone: exit %d", code)
	}
	os.WriteFile(filepath.Join(dir, "00000000000000000009.log"), nil, 0o644)
	code, _, errOut = runCmd("dump", p)
	if code != 1 || !strings.Contains(errOut, "byte 702: batch ends at offset 9, past the segment's last offset 8") {
		t.Fatalf("bounded: exit %d, %q", code, errOut)
	}
}
