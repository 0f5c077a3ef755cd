//go:build noreadyield

package redirect

// yieldEnabled: off in this build (-tags noreadyield; benchmarks only).
const yieldEnabled = false
