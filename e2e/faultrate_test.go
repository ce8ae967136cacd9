package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/rsm/rsmtest"
)

// retryable are the statuses a client may retry; anything else on a fetch
// of a tiered offset is a failure.
var retryable = map[codes.Code]bool{codes.Unavailable: true, codes.DeadlineExceeded: true}

// TestFaultRate puts an HTTP proxy that answers 10% of requests with 503,
// 500, a reset connection, a stall or a cut-off body between tierd and
// MinIO. At least 100 segment copies and 1000 fetches must end with every
// segment copied, every fetch answered correctly or with a retryable status
// (and correctly on retry), and nothing lost. TIERD_FAULT_SCALE divides the
// counts: 4 by default (CI), 1 for the full run ("make faults").
func TestFaultRate(t *testing.T) {
	scale := 4
	if v := os.Getenv("TIERD_FAULT_SCALE"); v != "" {
		scale, _ = strconv.Atoi(v)
	}
	segments, fetches := 100/scale, 1000/scale
	w := newFaultWorld(t, "faults", 3)
	w.proxy.SetRandom(0.10, 42, rsmtest.SlowDown, rsmtest.Internal, rsmtest.Reset, rsmtest.Stall, rsmtest.Truncate)
	perPartition := segments / 2
	for _, tp := range []string{"a-0", "b-0"} {
		w.writeLog(tp, perPartition*5, 1000, 5)
	}
	c := w.copier(2 * time.Second)
	copied, passes := 0, 0
	for ; copied < 2*perPartition && passes < 100; passes++ {
		n, _ := c.Sync(context.Background()) // failures are retried next pass
		copied += n
	}
	if copied != 2*perPartition {
		t.Fatalf("copied %d of %d segments in %d passes", copied, 2*perPartition, passes)
	}
	tps := []remotelog.TopicPartition{{Topic: "a"}, {Topic: "b"}}
	// One more pass cleans up after the last failures.
	w.proxy.SetRandom(0, 1)
	c.Sync(context.Background())
	w.checkNoOrphans(tps...)
	for _, tp := range tps {
		fin, _ := w.store.FinishedSegments(tp)
		for _, r := range fin {
			mf, err := w.mgr.ReadManifest(context.Background(), w.mgr.Key(r, ".manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range mf.Objects {
				if err := w.mgr.VerifyObject(context.Background(), o); err != nil {
					t.Fatalf("%s: %v", o.Key, err)
				}
			}
		}
	}
	// Fetches through the faulty proxy.
	w.proxy.SetRandom(0.10, 43, rsmtest.SlowDown, rsmtest.Internal, rsmtest.Reset, rsmtest.Stall, rsmtest.Truncate)
	client := serveFetch(t, w.store, w.mgr)
	rng := rand.New(rand.NewPCG(5, 6))
	codesSeen := map[codes.Code]int{}
	for i := 0; i < fetches; i++ {
		topic := []string{"a", "b"}[rng.IntN(2)]
		off := int64(rng.IntN(perPartition * 5))
		for attempt := 0; ; attempt++ {
			fctx, fcancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			resp, err := client.API().Fetch(fctx, &tierdpb.FetchRequest{Topic: topic, Offset: off, MaxBytes: 1})
			fcancel()
			code := status.Code(err)
			codesSeen[code]++
			if err == nil {
				recs, rerr := records(resp.Records)
				if rerr != nil || len(recs) == 0 || recs[0].Offset != off || !bytes.Equal(recs[0].Value, value(off)[:1000]) {
					t.Fatalf("fetch %s@%d: wrong answer (%v)", topic, off, rerr)
				}
				break
			}
			if !retryable[code] {
				t.Fatalf("fetch %s@%d: %v (not retryable)", topic, off, err)
			}
			if attempt == 20 {
				t.Fatalf("fetch %s@%d still failing after 20 retries: %v", topic, off, err)
			}
		}
	}
	fmt.Printf("fault test: %d segments copied in %d passes, %d fetches all answered correctly (attempts by status %v), proxy faults %v\n",
		copied, passes, fetches, codesSeen, w.proxy.Counts())
}
