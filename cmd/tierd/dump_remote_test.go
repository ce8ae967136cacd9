package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
	"github.com/tierd/tierd/rsm"
)

// TestDumpRemoteObjects: the objects of a remote copy, downloaded under
// their keys' names (<base offset>-<segment id><suffix>), dump exactly as
// the broker's files they were copied from; a manifest prints as one JSON
// line, and a damaged one is refused.
func TestDumpRemoteObjects(t *testing.T) {
	src := testfixtures.Path(t, "ldi-kafka370-kraft", "__consumer_offsets-6")
	id := remotelog.NewSegmentID()
	dir := t.TempDir()
	for local, suffix := range map[string]string{
		"00000000000000000000.log":       ".log",
		"00000000000000000000.index":     ".index",
		"00000000000000000000.timeindex": ".timeindex",
		"00000000000000000013.snapshot":  ".snapshot",
		"leader-epoch-checkpoint":        remotelog.LeaderEpochIndex.Suffix(),
	} {
		data, err := os.ReadFile(filepath.Join(src, local))
		if err != nil {
			t.Fatal(err)
		}
		remote := filepath.Join(dir, "00000000000000000000-"+id.String()+suffix)
		if err := os.WriteFile(remote, data, 0o644); err != nil {
			t.Fatal(err)
		}
		code, want, e := runCmd("dump", filepath.Join(src, local))
		if code != 0 || (want == "" && suffix != ".snapshot") { // this snapshot holds no producers
			t.Fatalf("dump %s: exit %d, %s", local, code, e)
		}
		code, got, e := runCmd("dump", remote)
		if code != 0 || got != want {
			t.Errorf("dump of the remote %s: exit %d, %s\ngot:\n%s\nwant (as the broker's %s):\n%s", suffix, code, e, got, local, want)
		}
	}

	m := rsm.Manifest{FormatVersion: rsm.ManifestFormatVersion, Topic: "__consumer_offsets", Partition: 6, SegmentID: id, EndOffset: 12, SizeInBytes: 13751}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(dir, "00000000000000000000-"+id.String()+rsm.ManifestSuffix)
	if err := os.WriteFile(mp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, e := runCmd("dump", mp)
	if ls := lines(t, out); code != 0 || len(ls) != 1 || ls[0]["topic"] != "__consumer_offsets" || ls[0]["sizeInBytes"] != 13751.0 {
		t.Fatalf("dump of a manifest: exit %d, %s\n%s", code, e, out)
	}
	if err := os.WriteFile(mp, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, e := runCmd("dump", mp); code == 0 || !strings.Contains(e, "not a copy manifest") {
		t.Fatalf("dump of a truncated manifest: exit %d, %s", code, e)
	}
}
