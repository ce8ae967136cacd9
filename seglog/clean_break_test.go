package seglog

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
)

// TestCleanAbandonedWhenTieringRemovesAGroupSegment checks that a segment
// removed by tiering's local retention (its files renamed to .deleted)
// while Clean writes its group abandons the cleaning with nothing changed:
// no swap left pending, and a reopen does not bring the removed offsets
// back.
func TestCleanAbandonedWhenTieringRemovesAGroupSegment(t *testing.T) {
	clock := newFakeClock()
	dir := partitionDir(t, "tiered-0")
	cfg := compactConfig()
	l := mustOpen(t, dir, cfg, WithClock(clock.Now))
	defer func() { l.Close() }()
	for seg := 0; seg < 3; seg++ {
		for i := 0; i < 5; i++ {
			appendKV(t, l, fmt.Sprintf("k%d", i), []byte(fmt.Sprint(seg)))
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	appendKV(t, l, "z", []byte("x"))
	// Clean reads the clock when it plans and again when it starts writing
	// the first group: at that moment tiering's local retention renames
	// segment 0's files to .deleted, as copier.markDeleted does.
	calls := 0
	l.now = func() time.Time {
		if calls++; calls == 2 {
			for _, sfx := range []string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix} {
				p := filepath.Join(dir, kafkalog.FileName(0, sfx))
				if err := os.Rename(p, p+kafkalog.DeletedSuffix); err != nil {
					t.Error(err)
				}
			}
		}
		return clock.Now()
	}
	if _, err := l.Clean(); !errors.Is(err, ErrCleanAbandoned) {
		t.Fatalf("Clean after tiering removed segment 0: %v, want ErrCleanAbandoned", err)
	}
	if calls < 2 {
		t.Fatalf("the clock was read %d times; the test did not remove segment 0 during Clean", calls)
	}
	if _, err := os.Stat(filepath.Join(dir, kafkalog.FileName(0, kafkalog.LogSuffix)+kafkalog.SwapSuffix)); err == nil {
		t.Fatal("a .swap file was left behind")
	}
	l.now = clock.Now
	// The next pass works on what is left.
	if _, err := l.Clean(); err != nil {
		t.Fatalf("Clean after the abandoned pass: %v", err)
	}
	l.Close()
	l = mustOpen(t, dir, cfg, WithClock(clock.Now))
	if got := l.LogStartOffset(); got != 5 {
		t.Fatalf("log start offset %d after reopen, want 5 (segment 0 went to tiering)", got)
	}
	latest, _ := latestByKey(readRecords(t, l))
	for i := 0; i < 5; i++ {
		if v := string(latest[fmt.Sprintf("k%d", i)]); v != "2" {
			t.Fatalf("k%d = %q after reopen, want 2", i, v)
		}
	}
}

// TestCleanCorruptCleanSegmentErrors corrupts a batch in a segment below
// the cleaner checkpoint (the offset map does not read it, so the
// corruption is met while the group is rewritten): Clean must return a
// corruption error, leave no .cleaned file and change nothing.
func TestCleanCorruptCleanSegmentErrors(t *testing.T) {
	clock := newFakeClock()
	dir := partitionDir(t, "corrupt-0")
	cfg := compactConfig()
	l := mustOpen(t, dir, cfg, WithClock(clock.Now))
	defer func() { l.Close() }()
	for i := 0; i < 5; i++ {
		appendKV(t, l, fmt.Sprintf("k%d", i), []byte("v"))
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	appendKV(t, l, "z", []byte("x"))
	if st, err := l.Clean(); err != nil || !st.Cleaned {
		t.Fatalf("first pass: %+v %v", st, err)
	}
	// Flip a byte in the last record of the cleaned segment 0.
	p := filepath.Join(dir, kafkalog.FileName(0, kafkalog.LogSuffix))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	appendKV(t, l, "y", []byte("x"))
	before := l.Segments()
	_, err = l.Clean()
	if !errors.Is(err, kafkalog.ErrCorrupt) {
		t.Fatalf("Clean over a corrupt clean segment: %v, want a corruption error", err)
	}
	if got := l.Segments(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("segments changed: %v, was %v", got, before)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"+kafkalog.CleanedSuffix))
	if len(left) > 0 {
		t.Fatalf(".cleaned files left: %v", left)
	}
	after, err := os.ReadFile(p)
	if err != nil || string(after) != string(data) {
		t.Fatalf("segment 0 changed (%v)", err)
	}
}

// TestCleanAbandonedWhenRefreshDropsAGroupSegment is the same removal
// with a read noticing it (Refresh drops and closes the segment) while
// Clean still reads the segment's file: Clean must report
// ErrCleanAbandoned, not an I/O error on a closed file.
func TestCleanAbandonedWhenRefreshDropsAGroupSegment(t *testing.T) {
	clock := newFakeClock()
	dir := partitionDir(t, "tiered-0")
	cfg := compactConfig()
	l := mustOpen(t, dir, cfg, WithClock(clock.Now))
	defer func() { l.Close() }()
	for seg := 0; seg < 3; seg++ {
		for i := 0; i < 5; i++ {
			appendKV(t, l, fmt.Sprintf("k%d", i), []byte(fmt.Sprint(seg)))
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	appendKV(t, l, "z", []byte("x"))
	calls := 0
	l.now = func() time.Time {
		if calls++; calls == 2 {
			for _, sfx := range []string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix} {
				p := filepath.Join(dir, kafkalog.FileName(0, sfx))
				if err := os.Rename(p, p+kafkalog.DeletedSuffix); err != nil {
					t.Error(err)
				}
			}
			l.Refresh()
		}
		return clock.Now()
	}
	if _, err := l.Clean(); !errors.Is(err, ErrCleanAbandoned) {
		t.Fatalf("Clean after a read dropped segment 0: %v, want ErrCleanAbandoned", err)
	}
	l.now = clock.Now
	if _, err := l.Clean(); err != nil {
		t.Fatalf("Clean after the abandoned pass: %v", err)
	}
	latest, _ := latestByKey(readRecords(t, l))
	for i := 0; i < 5; i++ {
		if v := string(latest[fmt.Sprintf("k%d", i)]); v != "2" {
			t.Fatalf("k%d = %q, want 2", i, v)
		}
	}
}

// TestCleanWithAppendsAndTimeLookups runs Clean passes while one goroutine
// appends (rolling now and then, a transaction now and then) and another
// looks up offsets by timestamp and reads: run with -race. Afterwards every
// key's latest value is there, once below the checkpoint.
func TestCleanWithAppendsAndTimeLookups(t *testing.T) {
	clock := newFakeClock()
	cfg := compactConfig()
	cfg.DeleteRetentionMs = math.MaxInt64
	l := mustOpen(t, partitionDir(t, "busy-0"), cfg, WithClock(clock.Now))
	defer l.Close()
	want := map[string]string{}
	var mu sync.Mutex
	done := make(chan struct{})
	errs := make(chan error, 2)
	go func() {
		defer close(done)
		for i := 0; i < 400; i++ {
			key := fmt.Sprintf("k%d", i%17)
			v := fmt.Sprintf("%s-%d", key, i)
			if i%50 == 7 {
				if _, err := l.AppendTransactional(9, 0, Record{Key: []byte(key), Value: []byte(v)}); err != nil {
					errs <- err
					return
				}
				if _, err := l.EndTransaction(9, 0, true); err != nil {
					errs <- err
					return
				}
			} else if _, err := l.Append(Record{Key: []byte(key), Value: []byte(v)}); err != nil {
				errs <- err
				return
			}
			mu.Lock()
			want[key] = v
			mu.Unlock()
			if i%23 == 0 {
				if err := l.Roll(); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := l.OffsetForTimestamp(clock.Now().UnixMilli()); err != nil && !errors.Is(err, ErrNoTimestampFound) {
				errs <- err
				return
			}
			if _, err := scanRecords(l); err != nil {
				errs <- err
				return
			}
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		if _, err := l.Clean(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	appendKV(t, l, "end", []byte("x"))
	if _, err := l.Clean(); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, l)
	latest, count := latestByKey(recs)
	for k, v := range want {
		if string(latest[k]) != v || count[k] != 1 {
			t.Fatalf("%s: latest %q (%d records), want %q once", k, latest[k], count[k], v)
		}
	}
}

// TestCleanStaleCheckpointOfARecreatedLog deletes a cleaned partition
// directory and creates the log again (a topic deleted and recreated): the
// old cleaner checkpoint entry must not make the new log's first offsets
// count as cleaned, or a key's older value there outlives its tombstone.
func TestCleanStaleCheckpointOfARecreatedLog(t *testing.T) {
	clock := newFakeClock()
	cfg := compactConfig()
	dir := partitionDir(t, "recreated-0")
	l := mustOpen(t, dir, cfg, WithClock(clock.Now))
	for i := 0; i < 20; i++ {
		appendKV(t, l, fmt.Sprintf("old%d", i), []byte("x"))
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	appendKV(t, l, "z", []byte("x"))
	if st, err := l.Clean(); err != nil || st.FirstUncleanableOffset != 20 {
		t.Fatalf("first log's pass: %+v %v", st, err)
	}
	l.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg, WithClock(clock.Now))
	defer func() { l.Close() }()
	appendKV(t, l, "k", []byte("v1"))
	appendKV(t, l, "k", nil)
	for i := 0; i < 30; i++ {
		appendKV(t, l, fmt.Sprintf("n%d", i), []byte("x"))
	}
	for pass := 0; pass < 2; pass++ {
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		appendKV(t, l, fmt.Sprintf("p%d", pass), []byte("x"))
		if _, err := l.Clean(); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Duration(cfg.DeleteRetentionMs+1) * time.Millisecond)
	}
	for _, r := range readRecords(t, l) {
		if string(r.Key) == "k" && r.Value != nil {
			t.Fatalf("k=%q at offset %d outlived its tombstone", r.Value, r.Offset)
		}
	}
}

// TestCompactedLogRefusesNullKeys checks Kafka's LogValidator rule: a
// compacted topic does not accept a record without a key, which the
// cleaner would otherwise drop silently after it was acknowledged.
func TestCompactedLogRefusesNullKeys(t *testing.T) {
	l := mustOpen(t, partitionDir(t, "nokey-0"), compactConfig())
	defer l.Close()
	appendKV(t, l, "a", []byte("1"))
	if _, err := l.Append(Record{Key: []byte("b"), Value: []byte("1")}, Record{Value: []byte("no key")}); !errors.Is(err, ErrNoKey) {
		t.Fatalf("append without a key to a compacted log: %v, want ErrNoKey", err)
	}
	if _, err := l.AppendTransactional(3, 0, Record{Value: []byte("no key")}); !errors.Is(err, ErrNoKey) {
		t.Fatalf("transactional append without a key: %v, want ErrNoKey", err)
	}
	if hw := l.HighWatermark(); hw != 1 {
		t.Fatalf("high watermark %d after refused appends, want 1", hw)
	}
	d := mustOpen(t, partitionDir(t, "nokeydelete-0"), smallConfig())
	defer d.Close()
	if _, err := d.Append(Record{Value: []byte("no key")}); err != nil {
		t.Fatalf("append without a key to a delete log: %v", err)
	}
}
