//go:build race

package e2e

// raceEnabled shortens the long concurrency tests under the race detector;
// "make harness" runs them at full count without it.
const raceEnabled = true
