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
// fails otherwise), the targets are reported, and the run leaves nothing
// in its prefix.
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
	var lines int
	for _, tg := range rep.Targets() {
		if strings.HasPrefix(tg.Text, "objects ") {
			lines++
		}
	}
	if lines != 16 {
		t.Errorf("%d objects target lines, want 16", lines)
	}
	if !strings.Contains(progress.String(), "deleted the ") {
		t.Errorf("no cleanup line:\n%s", progress.String())
	}
}
