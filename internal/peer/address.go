package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/linkforge/linkforge/internal/uses"
)

// ValidAddress reports whether addr is a host:port and nothing more, so
// that a peer address in status names a host and port, never a path or a
// user (the API's pattern for status.useReservations[].peer admits no more).
func ValidAddress(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || len(addr) > 261 {
		return false
	}
	for _, c := range host {
		if !hostRune(c) {
			return false
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n > 0 && port[0] != '0'
}

func hostRune(c rune) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.ContainsRune("._:-", c)
}

var errLocalAddress = errors.New("peer address on a loopback, link-local, multicast or unspecified network")

// Dialable reports whether a peer at ip may be asked: not a loopback,
// link-local (169.254.0.0/16, the clouds' metadata endpoints, fe80::/10),
// multicast or unspecified address, unless allowLocal.
func Dialable(ip net.IP, allowLocal bool) bool {
	if ip.IsUnspecified() || ip.IsMulticast() {
		return false
	}
	return allowLocal || !ip.IsLoopback() && !ip.IsLinkLocalUnicast()
}

// dialer connects to peers, checking every address a host name resolves
// to (a name in status cannot reach what an IP could not).
type dialer struct {
	allowLocal bool
	resolver   net.Resolver
}

// dialTimeout bounds a dial that fasthttp asks for without a timeout of
// its own (timeout <= 0): the connection it dials for a forward that
// waited for a free one (HostClient.dialConnFor), whose deadline it does
// not pass on. That forward gives up waiting after the client's
// MaxConnWaitTimeout anyway; the dial goes on for at most this long (no
// forward waits longer: uses.ForwardTimeout), and its connection, if any,
// joins the pool. Before, the zero timeout was an expired context, the
// dial failed at once and a live holder read as unreachable (issue 52).
const dialTimeout = uses.ForwardTimeout

// dialError is a failed dial: nothing was sent, and nothing answers at
// the address (or it may not be asked). Client.TakeFrom tells it from our
// own limits (no free connection) by this type.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

func (d *dialer) dial(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := d.dialBounded(addr, timeout)
	if err != nil {
		return nil, &dialError{err}
	}
	return c, nil
}

func (d *dialer) dialBounded(addr string, timeout time.Duration) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = dialTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ips, err := d.resolver.LookupIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	var nd net.Dialer
	for _, ip := range ips {
		if !Dialable(ip, d.allowLocal) {
			return nil, fmt.Errorf("%s (%s): %w", addr, ip, errLocalAddress)
		}
	}
	var last error
	for _, ip := range ips {
		c, err := nd.DialContext(ctx, "tcp", net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}
