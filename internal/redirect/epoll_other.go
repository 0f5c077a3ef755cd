//go:build !linux

package redirect

import (
	"context"
	"errors"
	"net"
	"time"
)

// EpollServer is the epoll front end of the redirect port; it needs Linux.
type EpollServer struct {
	IdleTimeout       time.Duration
	ReadHeaderTimeout time.Duration
	ShutdownTimeout   time.Duration
	Loops             int
}

var errNoEpoll = errors.New("epoll server needs Linux")

// NewEpollServer returns a server whose Start fails: epoll needs Linux.
func NewEpollServer(string, *Redirector) *EpollServer { return &EpollServer{} }

// NeedLeaderElection is false.
func (*EpollServer) NeedLeaderElection() bool { return false }

// Addr is nil.
func (*EpollServer) Addr() net.Addr { return nil }

// Listen fails.
func (*EpollServer) Listen() error { return errNoEpoll }

// Start fails.
func (*EpollServer) Start(context.Context) error { return errNoEpoll }
