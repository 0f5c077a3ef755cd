package redirect

import (
	"net"
	"syscall"
)

// inputPeeker tells whether a connection has input waiting, without reading
// it or waiting for it. It is built once per connection, so that a check
// allocates nothing.
type inputPeeker struct {
	raw     syscall.RawConn
	peekFn  func(fd uintptr)
	waiting bool
	buf     [1]byte
}

// newInputPeeker returns the peeker of c, or nil if c is not a socket.
func newInputPeeker(c net.Conn) *inputPeeker {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &inputPeeker{raw: raw}
	p.peekFn = p.peek
	return p
}

// pending reports whether a read would return at once: bytes, the end of
// the stream or an error are waiting.
func (p *inputPeeker) pending() bool {
	p.waiting = true // if the descriptor is gone, the read fails at once
	_ = p.raw.Control(p.peekFn)
	return p.waiting
}

func (p *inputPeeker) peek(fd uintptr) {
	_, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	p.waiting = err != syscall.EAGAIN
}
