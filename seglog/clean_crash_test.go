package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/tierd/tierd/internal/crashpoint"
)

// crashWrite is one record the crash and fuzz tests wrote.
type crashWrite struct {
	key   string
	value []byte // nil for a tombstone
}

// cleanCrashValue is a 20000-byte value naming its offset.
func cleanCrashValue(off int64) []byte {
	v := bytes.Repeat([]byte{'#'}, 20000)
	copy(v, fmt.Sprintf("value-at-%d", off))
	return v
}

// writeKeyed appends n records with keys k0..k9 (every 7th a tombstone)
// and notes them in model.
func writeKeyed(t *testing.T, l *Log, n int, model map[int64]crashWrite) {
	t.Helper()
	for i := 0; i < n; i++ {
		off := l.HighWatermark()
		w := crashWrite{key: fmt.Sprintf("k%d", off%10), value: cleanCrashValue(off)}
		if off%7 == 6 {
			w.value = nil
		}
		appendKV(t, l, w.key, w.value)
		model[off] = w
	}
}

// checkAgainstModel reads the whole log and checks it against what was
// written: each record read is the one written at its offset, offsets
// ascend (readRecords), the latest record of every key is there, and below
// the cleaner checkpoint no key appears twice.
func checkAgainstModel(t *testing.T, l *Log, model map[int64]crashWrite, tombstonesMayGo bool) {
	t.Helper()
	recs := readRecords(t, l)
	latest := map[string]int64{}
	for off, w := range model {
		if cur, ok := latest[w.key]; !ok || off > cur {
			latest[w.key] = off
		}
	}
	seen := map[int64]bool{}
	cp, _, err := l.CleanerCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	cleanKeys := map[string]bool{}
	for _, r := range recs {
		w, ok := model[r.Offset]
		if !ok || w.key != string(r.Key) || !bytes.Equal(w.value, r.Value) || (w.value == nil) != (r.Value == nil) {
			t.Fatalf("offset %d: read %q, written %q", r.Offset, r.Key, w.key)
		}
		seen[r.Offset] = true
		if r.Offset < cp {
			if cleanKeys[w.key] {
				t.Fatalf("key %s twice below the cleaner checkpoint %d", w.key, cp)
			}
			cleanKeys[w.key] = true
		}
	}
	for key, off := range latest {
		if !seen[off] && (model[off].value != nil || !tombstonesMayGo) {
			t.Fatalf("latest record of %s (offset %d) lost", key, off)
		}
		if !seen[off] { // a tombstone that went: nothing of the key may remain
			for _, r := range recs {
				if string(r.Key) == key {
					t.Fatalf("key %s: tombstone at %d gone but offset %d remains", key, off, r.Offset)
				}
			}
		}
	}
}

// crashSetup builds a log with a cleaned part and a dirty part of several
// segments, and returns what was written.
func crashSetup(t *testing.T, dir string, clock *fakeClock) map[int64]crashWrite {
	model := map[int64]crashWrite{}
	l := mustOpen(t, dir, compactConfig(), WithClock(clock.Now))
	defer l.Close()
	writeKeyed(t, l, 120, model)
	if st, err := l.Clean(); err != nil || !st.Cleaned {
		t.Fatalf("setup clean: %+v %v", st, err)
	}
	writeKeyed(t, l, 160, model)
	return model
}

// TestCleanCrashChild is the child process of TestCleanCrashPoints: it
// opens the log in $SEGLOG_CLEAN_CRASH_DIR and cleans it, and is killed at
// the crash point named in $TIERD_CRASHPOINT.
func TestCleanCrashChild(t *testing.T) {
	dir := os.Getenv("SEGLOG_CLEAN_CRASH_DIR")
	if dir == "" {
		t.Skip("run by TestCleanCrashPoints")
	}
	l := mustOpen(t, dir, compactConfig(), WithClock(newFakeClock().Now))
	if _, err := l.Clean(); err != nil {
		t.Fatal(err)
	}
	t.Fatal("the crash point was not reached")
}

// TestCleanCrashPoints kills a child process at each step of the swap (in
// the first and in the second segment group of a pass), then opens the
// log: it must recover to one consistent log, every key's latest record
// present and no offset twice, and a new pass must finish the cleaning.
func TestCleanCrashPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	points := []string{CrashCleaned, CrashSwap, CrashDeleted, CrashLive, CrashCheckpoint}
	for _, p := range points {
		for _, nth := range []string{"", ":2"} {
			if p == CrashCheckpoint && nth != "" {
				continue // one checkpoint write per pass
			}
			t.Run(p+nth, func(t *testing.T) {
				clock := newFakeClock()
				dir := partitionDir(t, "crash-0")
				model := crashSetup(t, dir, clock)
				cmd := exec.Command(os.Args[0], "-test.run=^TestCleanCrashChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), "SEGLOG_CLEAN_CRASH_DIR="+dir, crashpoint.EnvVar+"="+p+nth)
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
					t.Fatalf("child was not killed at %s%s: %v\n%s", p, nth, err, out)
				}
				l := mustOpen(t, dir, compactConfig(), WithClock(clock.Now))
				defer l.Close()
				checkAgainstModel(t, l, model, false)
				checkIndexes(t, dir)
				if st, err := l.Clean(); err != nil {
					t.Fatalf("clean after recovery: %+v %v", st, err)
				}
				checkAgainstModel(t, l, model, false)
				ents, _ := os.ReadDir(dir)
				for _, e := range ents {
					for _, sfx := range []string{".cleaned", ".swap", ".deleted"} {
						if strings.HasSuffix(e.Name(), sfx) {
							t.Errorf("%s left after recovery and a clean pass", e.Name())
						}
					}
				}
			})
		}
	}
}
