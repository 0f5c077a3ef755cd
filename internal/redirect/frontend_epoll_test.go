//go:build linux

package redirect

import "testing"

func startFrontEnd(t *testing.T, r *Redirector) string {
	s, _ := startEpoll(t, r)
	return s.Addr().String()
}
