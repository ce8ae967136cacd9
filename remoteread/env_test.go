package remoteread

import (
	"testing"

	"github.com/tierd/tierd/internal/testutil/readtest"
)

// env is an engine of a test over a readtest.Rig (its Store, Mgr, Bucket
// and TP), closed at the test's end.
type env struct {
	*readtest.Rig
	eng *Engine
}

// newEnv returns an engine of cfg over a filesystem bucket and Pebble.
func newEnv(t testing.TB, cfg Config, opts ...Option) *env {
	t.Helper()
	r := readtest.NewRig(t, readtest.FSBucket(t))
	eng, err := New(cfg, r.Store, r.Mgr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	return &env{Rig: r, eng: eng}
}
