package remoteread

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// A change of up to 256 rows at once (what rlmm.UpdateStates writes for
// one delete group: a run of the oldest copies, or scattered superseded
// ones, leaving the finished rows; or many rows finishing at once) applied
// to a snapshot list gives the list built whole from the rows left.
func TestFinListApplyGroupMatchesRebuild(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed*13))
			tp := remotelog.TopicPartition{Topic: "t", Partition: 0}
			model := map[remotelog.SegmentID]remotelog.SegmentMetadata{}
			var order []remotelog.SegmentMetadata
			off := int64(0)
			for i := 0; i < 1500; i++ {
				n := 1 + rng.Int64N(50)
				m := remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: off, EndOffset: off + n - 1,
					EventTimestampMs: int64(i), State: remotelog.CopySegmentFinished}
				if rng.IntN(8) == 0 && i > 3 { // a merged copy covering the last few
					p := order[len(order)-3]
					m.StartOffset = p.StartOffset
				}
				off += n
				model[m.ID] = m
				order = append(order, m)
			}
			rows := func() []remotelog.SegmentMetadata {
				out := make([]remotelog.SegmentMetadata, 0, len(model))
				for _, m := range model {
					out = append(out, m)
				}
				return out
			}
			l := newFinList(rows())
			for step := 0; step < 12 && len(model) > 0; step++ {
				var ops []remotelog.FinishedOp
				switch step % 3 {
				case 0: // the oldest up to 256, as a retention group
					n := 0
					for _, m := range order {
						if _, ok := model[m.ID]; !ok {
							continue
						}
						if n == 256 {
							break
						}
						delete(model, m.ID)
						ops = append(ops, remotelog.FinishedOp{StartOffset: m.StartOffset, ID: m.ID})
						n++
					}
				case 1: // scattered, as superseded copies
					for _, m := range model {
						if len(ops) == 200 {
							break
						}
						if rng.IntN(3) == 0 {
							delete(model, m.ID)
							ops = append(ops, remotelog.FinishedOp{StartOffset: m.StartOffset, ID: m.ID})
						}
					}
				case 2: // many finishing at once
					for k := 0; k < 256; k++ {
						s := rng.Int64N(off)
						m := remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: s, EndOffset: s + rng.Int64N(80),
							EventTimestampMs: 5000 + int64(rng.IntN(3)), State: remotelog.CopySegmentFinished}
						model[m.ID] = m
						ops = append(ops, remotelog.FinishedOp{StartOffset: m.StartOffset, ID: m.ID, Row: &m})
					}
				}
				l = l.apply(ops)
				sameList(t, fmt.Sprintf("step %d (%d ops)", step, len(ops)), l, newFinList(rows()), rows())
			}
		})
	}
}
