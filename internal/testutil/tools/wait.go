package testtools

import (
	"testing"
	"time"
)

// WaitFor polls cond every 5 ms until it holds; the test fails, saying
// "never: <what>", after a minute (a guard against hanging, not a timing
// assertion).
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
