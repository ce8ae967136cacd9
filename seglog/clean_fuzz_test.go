package seglog

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// FuzzClean drives appends, tombstones, rolls, cleanings and the clock
// from fuzz bytes and checks the log against a model after every cleaning
// and after a reopen: each record read is the one written at its offset,
// offsets ascend, every key's latest record stays (a tombstone may go once
// its horizon passed, and then nothing of its key remains), and no key
// appears twice below the cleaner checkpoint.
func FuzzClean(f *testing.F) {
	f.Add([]byte{0, 1, 2, 7, 0, 8, 6, 7, 9, 9, 8, 3, 7, 8})
	f.Add([]byte{1, 1, 1, 7, 6, 7, 8, 9, 9, 0, 7, 8, 2, 7, 8})
	f.Add([]byte{5, 4, 6, 10, 7, 8, 1, 6, 7, 9, 8, 9, 9, 4, 7, 8})
	f.Add([]byte{0, 18, 7, 8, 11, 9, 9, 3, 7, 8, 11, 10, 7, 9, 9, 8})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		clock := newFakeClock()
		cfg := compactConfig()
		cfg.MinCleanableDirtyRatio = 0
		dir := partitionDir(t, "fuzz-0")
		l := mustOpen(t, dir, cfg, WithClock(clock.Now))
		defer func() { l.Close() }()
		model := map[int64]crashWrite{}
		for _, op := range ops {
			switch op % 12 {
			case 0, 1, 2, 3, 4, 5:
				off := l.HighWatermark()
				w := crashWrite{key: fmt.Sprintf("k%d", op%6), value: []byte(fmt.Sprintf("v%d", off))}
				appendKV(t, l, w.key, w.value)
				model[off] = w
			case 6:
				off := l.HighWatermark()
				w := crashWrite{key: fmt.Sprintf("k%d", (op/12)%6)}
				appendKV(t, l, w.key, nil)
				model[off] = w
			case 7:
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			case 8:
				if _, err := l.Clean(); err != nil {
					t.Fatal(err)
				}
				checkAgainstModel(t, l, model, true)
			case 9:
				clock.Advance(60 * time.Millisecond)
			case 10:
				// Several records in one batch, some with the same key.
				base := l.HighWatermark()
				recs := []Record{{Key: []byte("k1"), Value: []byte("b0")}, {Key: []byte("k2"), Value: []byte("b1")}, {Key: []byte("k1")}}
				if _, err := l.Append(recs...); err != nil {
					t.Fatal(err)
				}
				for i, r := range recs {
					model[base+int64(i)] = crashWrite{key: string(r.Key), value: r.Value}
				}
			case 11:
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l = mustOpen(t, dir, cfg, WithClock(clock.Now))
			}
		}
		checkAgainstModel(t, l, model, true)
		checkIndexes(t, dir)
	})
}

// TestCleanWhileReading runs cleanings while readers scan the whole log
// again and again, as the reference scan consumer does: every scan must end
// with the latest value of every key, and see offsets only ascend.
func TestCleanWhileReading(t *testing.T) {
	clock := newFakeClock()
	cfg := compactConfig()
	dir := partitionDir(t, "race-0")
	l := mustOpen(t, dir, cfg, WithClock(clock.Now))
	defer l.Close()
	want := map[string]string{}
	write := func(n int) {
		for i := 0; i < n; i++ {
			key := fmt.Sprintf("k%d", i%40)
			v := paddedValue(fmt.Sprintf("%s-%d", key, l.HighWatermark()))
			appendKV(t, l, key, v)
			want[key] = string(v)
		}
	}
	write(600)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				recs, err := scanRecords(l)
				if err != nil {
					errs <- err
					return
				}
				latest, _ := latestByKey(recs)
				for k, v := range want {
					if string(latest[k]) != v {
						errs <- fmt.Errorf("scan ended with %s=%.12q, want %.12q", k, latest[k], v)
						return
					}
				}
			}
		}()
	}
	for i := 0; i < 3; i++ {
		if st, err := l.Clean(); err != nil {
			t.Fatal(err)
		} else if i == 0 && !st.Cleaned {
			t.Fatalf("first pass did not clean: %+v", st)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if n := len(readRecords(t, l)); n != 40 {
		t.Fatalf("%d records after cleaning, want 40", n)
	}
}
