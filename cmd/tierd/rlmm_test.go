package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
)

// TestRebuildFailureKeepsMetadata: a rebuild that fails midway (here the
// log dirs' listing, after the new store opened and took the scheduled
// deletions over) leaves the metadata dir as it was, scheduled deletion
// and journal included, with nothing beside it, and says so; the retry,
// the fault gone, carries them over.
func TestRebuildFailureKeepsMetadata(t *testing.T) {
	root := t.TempDir()
	logs := filepath.Join(root, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := writeConfig(t, root, "filesystem:\n    dir: "+filepath.Join(root, "bucket"), freeAddr(t), "")
	meta := filepath.Join(root, "metadata")
	const topicID = "AAAAAAAAAAAAAAAAAAAAAQ"
	tp := remotelog.TopicPartition{Topic: "gone", Partition: 0}
	s, err := rlmm.Open(rlmm.Config{Dir: meta})
	if err != nil {
		t.Fatal(err)
	}
	m := remotelog.SegmentMetadata{TopicPartition: tp, TopicID: topicID, ID: remotelog.NewSegmentID(), EndOffset: 99, SizeInBytes: 100,
		State: remotelog.CopySegmentStarted, MaxTimestampMs: 1000}
	if err := s.AddSegment(m); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateState(tp, 0, m.ID, remotelog.CopySegmentFinished); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTopicID(tp, topicID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ScheduleDeletion(tp, topicID, remotelog.ReasonOperator, "test", 1<<62); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	intact := func(when string) {
		t.Helper()
		s, err := rlmm.Open(rlmm.Config{Dir: meta})
		if err != nil {
			t.Fatalf("%s: the metadata dir does not open: %v", when, err)
		}
		defer s.Close()
		ds, err := s.Deletions(nil)
		if err != nil || len(ds) != 1 || ds[0].TopicPartition != tp {
			t.Errorf("%s: scheduled deletions %v %v, want the one of %s", when, ds, err, tp)
		}
		if j, err := s.Journal(0, 0); err != nil || len(j) != 1 || j[0].Event != remotelog.JournalScheduled {
			t.Errorf("%s: journal %v %v, want its scheduled entry", when, j, err)
		}
	}

	// A live segment name that is a directory: the rebuild's listing of
	// the log dirs fails.
	bad := filepath.Join(logs, "orders-0")
	if err := os.MkdirAll(filepath.Join(bad, "00000000000000000000.log"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd("rlmm", "rebuild", "--config", cfgPath)
	if code != 1 || !strings.Contains(errOut, "the metadata dir "+meta+" is as it was, the partial rebuild removed") {
		t.Fatalf("failed rebuild: exit %d\n%s%s", code, out, errOut)
	}
	intact("after the failed rebuild")
	if beside, _ := filepath.Glob(meta + ".*"); len(beside) != 0 {
		t.Errorf("left beside the metadata dir: %v", beside)
	}

	if err := os.RemoveAll(bad); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCmd("rlmm", "rebuild", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "carried over 1 scheduled deletion(s) and 1 journal entries") || !strings.Contains(out, "moved the old metadata to "+meta+".old-") {
		t.Fatalf("retry: exit %d\n%s%s", code, out, errOut)
	}
	intact("after the retry")
	if olds, _ := filepath.Glob(meta + ".old-*"); len(olds) != 1 {
		t.Errorf("old metadata dirs %v, want one", olds)
	}
}
