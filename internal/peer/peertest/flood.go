// Package peertest holds what tests of the peer port share: a flood of
// silent connections, as clients without the key would send it.
package peertest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Flood holds silent connections to a peer port from many loopback
// addresses (127.0.0.2 on: a pod each), PerAddress from each, each dialled
// again as soon as the port drops it, until End.
type Flood struct {
	open    atomic.Int64
	longest atomic.Int64 // ns
	stop    chan struct{}
	wg      sync.WaitGroup
	ended   sync.Once
}

// StartFlood floods addr from addresses loopback addresses, perAddress
// connections each.
func StartFlood(addr string, addresses, perAddress int) *Flood {
	f := &Flood{stop: make(chan struct{})}
	for a := range addresses {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, byte(a/250), byte(2+a%250))}}
		for range perAddress {
			f.wg.Go(func() { f.hold(d, addr) })
		}
	}
	return f
}

// hold keeps one connection to addr open, dialling again when it closes.
func (f *Flood) hold(d net.Dialer, addr string) {
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			select { // out of ports for a moment: a pause, not a spin
			case <-f.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		f.open.Add(1)
		start := time.Now()
		done := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, c) // until the port closes it
			close(done)
		}()
		select {
		case <-done:
		case <-f.stop: // still held: held this long so far
		}
		for d := int64(time.Since(start)); ; {
			if l := f.longest.Load(); d <= l || f.longest.CompareAndSwap(l, d) {
				break
			}
		}
		f.open.Add(-1)
		_ = c.Close()
		<-done
	}
}

// Open is how many connections the flood holds now.
func (f *Flood) Open() int64 { return f.open.Load() }

// Longest is the longest the port held one of its connections (until it
// closed it, or until End for one still open).
func (f *Flood) Longest() time.Duration { return time.Duration(f.longest.Load()) }

// End stops the flood and closes its connections; it may be called again.
func (f *Flood) End() {
	f.ended.Do(func() { close(f.stop) })
	f.wg.Wait()
}
