package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/snapshot"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

// TestDumpCheckpoints dumps a real broker's offset checkpoints: the high
// watermarks PROVENANCE.md gives for its partitions, sorted by topic and
// partition; an empty cleaner-offset-checkpoint prints nothing; a damaged
// one fails naming the byte position.
func TestDumpCheckpoints(t *testing.T) {
	dir := testfixtures.Path(t, "iechenyb-2019-plain", "kafka-logs")
	code, out, errOut := runCmd("dump", filepath.Join(dir, "replication-offset-checkpoint"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	ls := lines(t, out)
	if len(ls) != 52 {
		t.Fatalf("%d lines, the file lists 52 partitions", len(ls))
	}
	want := map[string]float64{"string-key/0": 28162, "test-0921/0": 1521, "__consumer_offsets/36": 16}
	for _, l := range ls {
		k := fmt.Sprintf("%s/%v", l["topic"], l["partition"])
		if w, ok := want[k]; ok && l["offset"] != w {
			t.Errorf("%s: offset %v, want %v", k, l["offset"], w)
		}
		delete(want, k)
	}
	if len(want) != 0 {
		t.Errorf("missing %v", want)
	}
	if ls[0]["topic"] != "__consumer_offsets" || ls[0]["partition"] != 0.0 || ls[51]["topic"] != "test-0921" {
		t.Errorf("not sorted: first %v, last %v", ls[0], ls[51])
	}
	for _, name := range []string{"cleaner-offset-checkpoint", "log-start-offset-checkpoint"} {
		if code, out, errOut := runCmd("dump", filepath.Join(dir, name)); code != 0 || out != "" {
			t.Errorf("%s: exit %d %q %s", name, code, out, errOut)
		}
	}
	if code, out, _ := runCmd("dump", filepath.Join(dir, "recovery-point-offset-checkpoint")); code != 0 || len(lines(t, out)) != 52 {
		t.Errorf("recovery-point-offset-checkpoint: exit %d, %d lines", code, len(lines(t, out)))
	}
	bad := filepath.Join(t.TempDir(), "log-start-offset-checkpoint")
	os.WriteFile(bad, []byte("0\n2\norders 0 5\norders x 7\n"), 0o644)
	if code, _, errOut := runCmd("dump", bad); code != 1 || !strings.Contains(errOut, bad) || !strings.Contains(errOut, "byte 15") {
		t.Errorf("damaged checkpoint: exit %d %s", code, errOut)
	}
}

// TestDumpSnapshots dumps the real brokers' producer snapshots (all
// empty: no line, exit 0), one with two producers as a broker writes it
// (every field, the first sequence derived as kafka-dump-log.sh does), and
// the same with a flipped byte: the entries, then an error at byte 2 (the
// CRC) and exit 1.
func TestDumpSnapshots(t *testing.T) {
	for _, p := range []string{
		testfixtures.Path(t, "iechenyb-2019-plain", "kafka-logs", "test-0921-0", "00000000000000000839.snapshot"),
		testfixtures.Path(t, "ldi-kafka370-kraft", "__consumer_offsets-6", "00000000000000000013.snapshot"),
	} {
		if code, out, errOut := runCmd("dump", p); code != 0 || out != "" {
			t.Errorf("%s: exit %d %q %s", p, code, out, errOut)
		}
	}
	entries := []snapshot.Entry{
		{ProducerID: 4000, ProducerEpoch: 2, LastSequence: 99, LastOffset: 1203, OffsetDelta: 9, Timestamp: 1700000000999, CoordinatorEpoch: 5, CurrentTxnFirstOffset: 1190},
		{ProducerID: 4001, LastSequence: 0, LastOffset: 1204, Timestamp: 1700000001000, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	}
	p := filepath.Join(t.TempDir(), "00000000000000001205.snapshot")
	data := snapshot.Append(nil, entries)
	os.WriteFile(p, data, 0o644)
	code, out, errOut := runCmd("dump", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := `{"producerId":4000,"producerEpoch":2,"coordinatorEpoch":5,"currentTxnFirstOffset":1190,"firstSequence":90,"lastSequence":99,"lastOffset":1203,"offsetDelta":9,"timestamp":1700000000999}
{"producerId":4001,"producerEpoch":0,"coordinatorEpoch":-1,"currentTxnFirstOffset":-1,"firstSequence":0,"lastSequence":0,"lastOffset":1204,"offsetDelta":0,"timestamp":1700000001000}
`
	if out != want {
		t.Errorf("dump:\n%s\nwant:\n%s", out, want)
	}
	data[len(data)-1] ^= 1
	os.WriteFile(p, data, 0o644)
	code, out, errOut = runCmd("dump", p)
	if code != 1 || len(lines(t, out)) != 2 || !strings.Contains(errOut, p) || !strings.Contains(errOut, "byte 2") || !strings.Contains(errOut, "CRC") {
		t.Errorf("damaged snapshot: exit %d\n%s%s", code, out, errOut)
	}
}
