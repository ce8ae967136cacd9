package copier

import (
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// A partition with only its active segment says there is no rolled
// segment yet, not that every rolled segment has a copy.
func TestStatusNoRolledSegmentYet(t *testing.T) {
	r := newRig(t, DefaultConfig(), nil)
	writeSegment(t, r.dir(), 0, seq(0, 5), same(r.now.UnixMilli(), 5), 10)
	r.sync()
	if st := r.status(r.tp); st.State != remotelog.TierUpToDate || !strings.HasPrefix(st.Detail, "no rolled segment yet") {
		t.Fatalf("status %+v", st)
	}
}
