package remoteread

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
)

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMissingCopyLoggedOnce: a client retrying a read of a copy whose
// object is gone (franz-go does, thousands of times a second) gets
// ErrDataLoss every time and the hook is told every time, but the copy is
// logged once.
func TestMissingCopyLoggedOnce(t *testing.T) {
	var logs lockedBuf
	var mu sync.Mutex
	told := 0
	e := newEnv(t, DefaultConfig(), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		WithMissingCopyHook(func(remotelog.SegmentMetadata) { mu.Lock(); told++; mu.Unlock() }))
	readtest.ReferenceLog(t, e.Rig)
	fin, _ := e.Store.FinishedSegments(e.TP)
	ctx := context.Background()
	if err := e.Bucket.Delete(ctx, e.Mgr.Key(fin[2], ".log")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := e.eng.ReadRemote(ctx, e.TP, 500, 1); !errors.Is(err, ErrDataLoss) {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if n := strings.Count(logs.String(), "read answered DATA_LOSS"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if told != 50 {
		t.Errorf("hook told %d times, want 50", told)
	}
}
