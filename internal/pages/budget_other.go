//go:build !linux

package pages

import "time"

// threadCPU is Linux-only: elsewhere renders are charged their wall time.
func threadCPU() (time.Duration, bool) { return 0, false }
