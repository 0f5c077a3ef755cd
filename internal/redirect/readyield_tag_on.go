//go:build !noreadyield

package redirect

// yieldEnabled: the read yield is on. Building with -tags noreadyield
// turns it off, so that hack/bench-redirect.sh (YIELD=off) can measure the
// same server without it; it is not a user setting.
const yieldEnabled = true
