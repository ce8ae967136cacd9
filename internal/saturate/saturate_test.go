package saturate

import (
	"math"
	"testing"
	"time"
)

func TestMillis(t *testing.T) {
	for _, c := range []struct {
		ms   int64
		want time.Duration
	}{
		{0, 0}, {1, time.Millisecond}, {60000, time.Minute},
		{MaxMillis - 1, time.Duration(MaxMillis-1) * time.Millisecond},
		{MaxMillis, Forever}, {MaxMillis + 1, Forever}, {math.MaxInt64 / 1000000, Forever}, {math.MaxInt64/1000000 + 1, Forever}, {math.MaxInt64/1000000 + 1000, Forever},
		{math.MaxInt64, Forever}, {-1, -time.Millisecond}, {math.MinInt64, -Forever}, {-MaxMillis - 1, -Forever},
	} {
		if got := Millis(c.ms); got != c.want {
			t.Errorf("Millis(%d) = %v, want %v", c.ms, got, c.want)
		}
		if got := Millis(c.ms); (c.ms > 0 && got <= 0) || (c.ms < 0 && got >= 0) {
			t.Errorf("Millis(%d) = %v changed sign", c.ms, got)
		}
	}
}

func TestAddSubMul(t *testing.T) {
	now := time.Now().UnixMilli()
	if got := Add(now, math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("Add(now, MaxInt64) = %d", got)
	}
	if got := Add(-now, math.MinInt64); got != math.MinInt64 {
		t.Errorf("Add(-now, MinInt64) = %d", got)
	}
	if got := Add(3, -5); got != -2 {
		t.Errorf("Add(3, -5) = %d", got)
	}
	if got := Sub(now, math.MinInt64); got != math.MaxInt64 {
		t.Errorf("Sub(now, MinInt64) = %d", got)
	}
	if got := Sub(math.MinInt64+1, 5); got != math.MinInt64 {
		t.Errorf("Sub(MinInt64+1, 5) = %d", got)
	}
	if got := Mul(1<<40, 1<<40); got != math.MaxInt64 {
		t.Errorf("Mul(2^40, 2^40) = %d", got)
	}
	if got := Mul(16<<20, 2); got != 32<<20 {
		t.Errorf("Mul(16MiB, 2) = %d", got)
	}
}

func TestOlder(t *testing.T) {
	now := time.Now().UnixMilli()
	for _, c := range []struct {
		ts, limit int64
		want      bool
	}{
		{now - 1000, 999, true}, {now - 1000, 1000, false}, {now, 0, false},
		{0, math.MaxInt64, false}, {math.MinInt64, math.MaxInt64, false}, {math.MinInt64, math.MaxInt64 - 1, true},
		{-1, math.MaxInt64, false}, {now - 1000, -1, false}, {math.MinInt64, -1, false},
		{now + 1000, 0, false},
	} {
		if got := Older(c.ts, now, c.limit); got != c.want {
			t.Errorf("Older(%d, now, %d) = %v, want %v", c.ts, c.limit, got, c.want)
		}
	}
}
