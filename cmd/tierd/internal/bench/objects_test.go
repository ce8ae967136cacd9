package bench

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/tierd/tierd/rsm/rsmtest"
)

// TestObjectsCase runs the objects case at a tiny size against a MinIO it
// starts: every form's measures exist, zstd shrinks the text shape and
// encryption alone does not, every byte read back was checked (the case
// fails otherwise), the cold Fetches are made again over a slow store and
// the targets judged there, and the run leaves nothing in its prefix.
func TestObjectsCase(t *testing.T) {
	if rsmtest.FindMinIO() == "" {
		rsmtest.StartMinIO(t) // skips, or fails under CI, with the reason
	}
	cfg := DefaultConfig()
	cfg.Cases, cfg.Rounds, cfg.ObjectsBytes, cfg.ObjectsChunkSizes = []string{"objects"}, 1, 16<<20, []int{256 << 10}
	cfg.Dir = t.TempDir()
	os.Remove(cfg.Dir)
	var progress bytes.Buffer
	rep, err := Run(t.Context(), cfg, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	ratio := func(variant string) float64 {
		s := rep.series("objects", variant, "stored_ratio")
		if s == nil || len(s.at(0)) != 1 {
			t.Fatalf("no stored_ratio of %s", variant)
		}
		return s.at(0)[0]
	}
	if r := ratio("text/zstd"); r > 0.6 || r <= 0 {
		t.Errorf("text/zstd stored %.3f of the original", r)
	}
	if r := ratio("text/aes"); r < 1 || r > 1.01 {
		t.Errorf("text/aes stored %.3f of the original", r)
	}
	if r := ratio("text/plain"); r != 1 {
		t.Errorf("plain stored %.3f", r)
	}
	for _, v := range []string{"padded/plain", "padded/zstd+aes", "text/zstd+aes"} {
		for _, m := range objectsMetrics {
			if s := rep.series("objects", v, m); s == nil || len(s.at(0)) != 1 || s.at(0)[0] < 0 {
				t.Errorf("%s %s: %v", v, m, s)
			}
		}
	}
	// The second cold-Fetch run waited for its store before every GET.
	if s := rep.series("objects", "text/aes", "fetch_store_cold_p50_ms"); s == nil || s.at(0)[0] < float64(cfg.ObjectsStoreLatency.Milliseconds()) {
		t.Errorf("cold Fetch over the slow store: %v, want at least its %s latency", s, cfg.ObjectsStoreLatency)
	}
	var lines, judged int
	for _, tg := range rep.Targets() {
		if strings.HasPrefix(tg.Text, "objects ") {
			lines++
		}
		if strings.HasPrefix(tg.Text, "objects cold Fetch p50 with 20ms store latency") && !tg.Info {
			judged++
		}
	}
	if lines != 22 || judged != 6 {
		t.Errorf("%d objects target lines, %d cold Fetch targets judged with the store's latency; want 22 and 6", lines, judged)
	}
	if !strings.Contains(progress.String(), "deleted the ") {
		t.Errorf("no cleanup line:\n%s", progress.String())
	}
}
