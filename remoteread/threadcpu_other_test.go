//go:build !linux

package remoteread

import "time"

// threadCPU is Linux's only; elsewhere CPU times report as 0.
func threadCPU() time.Duration { return 0 }
