package grpcapi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread"
)

// maxTSLog writes and tiers four segments of 12 records in batches of 3,
// timestamps out of order, the largest (9000) twice, each in the middle of
// a batch: offsets 13 and 40. It returns every tiered record.
func maxTSLog(t *testing.T, e *env) []batch.Record {
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ts := func(off int64) int64 {
		if off == 13 || off == 40 {
			return 9000
		}
		return 1000 + (off*7919)%97
	}
	var all []batch.Record
	for base := int64(0); base < 48; base += 12 {
		var entries [][]byte
		for b := base; b < base+12; b += 3 {
			en := readtest.Entry(t, b, 3, -1, ts)
			recs, err := batch.Records(en, nil)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, recs...)
			entries = append(entries, en)
		}
		readtest.WriteSegment(t, dir, base, nil, entries...)
	}
	readtest.WriteSegment(t, dir, 48, nil)
	e.Tier(dir)
	return all
}

// firstMax returns the first record at or after from with the largest
// timestamp, by looking at every record.
func firstMax(recs []batch.Record, from int64) (off, ts int64) {
	off, ts = -1, -1
	for _, r := range recs {
		if r.Offset >= from && r.Timestamp > ts {
			off, ts = r.Offset, r.Timestamp
		}
	}
	return off, ts
}

// MAX_TIMESTAMP finds the first record with the largest timestamp at or
// after the log start offset, wherever the log start offset lies: in the
// Go API and over gRPC, checked against every record.
func TestRemoteMaxTimestamp(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	recs := maxTSLog(t, e)
	ctx := context.Background()
	for lso := int64(0); lso < 48; lso++ {
		if _, err := e.Store.AdvanceOffsets(e.TP, lso, -1); err != nil {
			t.Fatal(err)
		}
		wantOff, wantTS := firstMax(recs, lso)
		off, ts, found, err := e.srv.Engine().RemoteMaxTimestamp(ctx, e.TP)
		if err != nil || !found || off != wantOff || ts != wantTS {
			t.Fatalf("log start %d: RemoteMaxTimestamp = %d at %d (%v, %v), want %d at %d", lso, ts, off, found, err, wantTS, wantOff)
		}
		r, err := e.api.ListOffsets(ctx, &tierdpb.ListOffsetsRequest{Topic: "t", Spec: tierdpb.OffsetSpec_MAX_TIMESTAMP})
		if err != nil || r.Offset != wantOff || r.Timestamp != wantTS {
			t.Fatalf("log start %d: ListOffsets(MAX_TIMESTAMP) = %v %v, want %d at %d", lso, r, err, wantTS, wantOff)
		}
		if lso == 0 && (off != 13 || ts != 9000) {
			t.Fatalf("the first of two records at 9000 is at 13, got %d", off)
		}
	}
	// Every copy gone to retention: nothing found.
	if _, err := e.Store.AdvanceOffsets(e.TP, 48, -1); err != nil {
		t.Fatal(err)
	}
	if _, _, found, err := e.srv.Engine().RemoteMaxTimestamp(ctx, e.TP); found || err != nil {
		t.Errorf("past every copy: found %v, %v", found, err)
	}
	if _, _, _, err := e.srv.Engine().RemoteMaxTimestamp(ctx, remotelog.TopicPartition{Topic: "x"}); !errors.Is(err, remoteread.ErrNotTiered) {
		t.Errorf("unknown partition: %v", err)
	}
}

// The Go timestamp lookup answers as ListOffsets TIMESTAMP does.
func TestRemoteOffsetForTimestamp(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	recs := maxTSLog(t, e)
	ctx := context.Background()
	for _, target := range []int64{0, 1000, 1050, 1096, 1097, 5000, 9000, 9001} {
		want := int64(-1)
		for _, r := range recs {
			if r.Timestamp >= target {
				want = r.Offset
				break
			}
		}
		off, ts, found, err := e.srv.Engine().RemoteOffsetForTimestamp(ctx, e.TP, target)
		if err != nil || found != (want >= 0) || (found && (off != want || ts < target)) {
			t.Errorf("RemoteOffsetForTimestamp(%d) = %d at %d (%v, %v), want offset %d", target, ts, off, found, err, want)
		}
		r, err := e.api.ListOffsets(ctx, &tierdpb.ListOffsetsRequest{Topic: "t", Spec: tierdpb.OffsetSpec_TIMESTAMP, Timestamp: target})
		if err != nil || r.Offset != want || (found && r.Timestamp != ts) {
			t.Errorf("ListOffsets(TIMESTAMP %d) = %v %v, want offset %d", target, r, err, want)
		}
	}
}
