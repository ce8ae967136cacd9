// Package saturate converts and combines the int64 settings tierd takes in
// Kafka's units (milliseconds, bytes) without wrapping: a result beyond what
// the type holds stays at the type's limit. Kafka operators write
// 9223372036854775807 (Long.MAX_VALUE) for "forever" and "no limit"; a Go
// time.Duration holds only 9223372036854 ms (about 292 years), so a plain
// time.Duration(ms)*time.Millisecond wraps such a value to a negative
// duration, which would make "forever" mean "now".
package saturate

import (
	"math"
	"time"
)

// MaxMillis is the largest millisecond count a time.Duration holds,
// 9223372036854 ms (about 292 years).
const MaxMillis = int64(math.MaxInt64 / int64(time.Millisecond))

// Forever is the time.Duration that Millis returns for MaxMillis ms or
// more: the largest one, about 292 years.
const Forever = time.Duration(math.MaxInt64)

// Millis converts ms milliseconds to a time.Duration, saturating: ms at
// or above MaxMillis gives Forever, ms at or below -MaxMillis gives
// -Forever.
func Millis(ms int64) time.Duration {
	switch {
	case ms >= MaxMillis:
		return Forever
	case ms <= -MaxMillis:
		return -Forever
	}
	return time.Duration(ms) * time.Millisecond
}

// Add returns a+b, or math.MaxInt64 / math.MinInt64 where the sum would
// leave int64's range.
func Add(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// Sub returns a-b saturating as Add does.
func Sub(a, b int64) int64 {
	if b == math.MinInt64 {
		if a >= 0 {
			return math.MaxInt64
		}
		return a - b
	}
	return Add(a, -b)
}

// Mul returns a*b for a, b >= 0, or math.MaxInt64 where the product would
// leave int64's range. A negative operand gives 0.
func Mul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// Older reports whether a time tsMs is more than limitMs older than nowMs
// (all ms), that is tsMs < nowMs-limitMs computed without wrapping: a
// limit of MaxInt64 ms (Kafka's "forever") is never exceeded, and a
// negative limit never is either (Kafka's -1: no limit).
func Older(tsMs, nowMs, limitMs int64) bool {
	if limitMs < 0 {
		return false
	}
	return Sub(nowMs, tsMs) > limitMs
}
