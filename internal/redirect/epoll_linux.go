//go:build linux

package redirect

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/sys/unix"
)

// EpollServer is the optional HTTP/1.1 front end of the redirect port: one
// epoll event loop per GOMAXPROCS, each on its own SO_REUSEPORT listener,
// answering exactly what ServeHTTP answers (both call Redirector.answer)
// without net/http's goroutine, bufio and header-map work per request.
//
// It speaks the part of HTTP/1.1 a redirector needs: keep-alive and
// pipelining, Content-Length bodies skipped (up to 64 KiB), no
// Transfer-Encoding (400), headers up to 8 KiB (431), absolute-form targets.
type EpollServer struct {
	addr string
	r    *Redirector

	// IdleTimeout closes a keep-alive connection with no request in progress.
	IdleTimeout time.Duration
	// ReadHeaderTimeout bounds the time from the first byte of a request to
	// its last header (and its body), and a response the client does not read.
	ReadHeaderTimeout time.Duration
	// ShutdownTimeout bounds the drain on shutdown.
	ShutdownTimeout time.Duration
	// Loops is the number of event loops; 0 means GOMAXPROCS.
	Loops int

	mu    sync.Mutex
	loops []*loop
	bound net.Addr
}

const (
	epollReadBuf   = 4 << 10  // initial read buffer of a connection
	epollMaxHeader = 8 << 10  // request line and headers
	epollMaxBody   = 64 << 10 // Content-Length bodies skipped; more is 413
	epollMaxEvents = 256
)

// NewEpollServer returns the epoll server of the redirect port on addr
// (host:port), with the timeouts of NewHTTPServer.
func NewEpollServer(addr string, r *Redirector) *EpollServer {
	return &EpollServer{
		addr:              addr,
		r:                 r,
		IdleTimeout:       120 * time.Second,
		ReadHeaderTimeout: 10 * time.Second,
		ShutdownTimeout:   30 * time.Second,
	}
}

// NeedLeaderElection is false: every replica serves.
func (*EpollServer) NeedLeaderElection() bool { return false }

// Addr is the bound address, once Listen has succeeded.
func (s *EpollServer) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bound
}

// Listen opens the listeners and epoll instances. Start calls it if it has
// not been called.
func (s *EpollServer) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loops != nil {
		return nil
	}
	n := s.Loops
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	sa, family, err := sockaddr(s.addr)
	if err != nil {
		return err
	}
	var loops []*loop
	fail := func(err error) error {
		for _, l := range loops {
			l.closeFDs()
		}
		return err
	}
	for i := range n {
		lfd, err := listenReusePort(family, sa)
		if err != nil {
			return fail(fmt.Errorf("listen %s: %w", s.addr, err))
		}
		if i == 0 {
			// Port 0: the others bind the port the first one got.
			got, err := unix.Getsockname(lfd)
			if err != nil {
				_ = unix.Close(lfd)
				return fail(err)
			}
			sa = got
			s.bound = tcpAddr(got)
		}
		l, err := newLoop(s, lfd)
		if err != nil {
			_ = unix.Close(lfd)
			return fail(err)
		}
		loops = append(loops, l)
	}
	s.loops = loops
	return nil
}

// Start serves until ctx ends, then drains: it stops accepting, finishes
// the responses in progress, closes idle connections and, after
// ShutdownTimeout, the rest. It is a manager Runnable.
func (s *EpollServer) Start(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	loops := s.loops
	s.mu.Unlock()
	errs := make(chan error, len(loops))
	for _, l := range loops {
		go func() { errs <- l.run() }()
	}
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
			return
		}
		deadline := time.Now().Add(s.ShutdownTimeout)
		for _, l := range loops {
			l.stop(deadline)
		}
	}()
	var first error
	for range loops {
		if err := <-errs; err != nil && first == nil {
			first = err
			// One loop failed: stop the others.
			for _, l := range loops {
				l.stop(time.Now())
			}
		}
	}
	close(stopped)
	return first
}

func sockaddr(addr string) (unix.Sockaddr, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, 0, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		if p, err = net.LookupPort("tcp", port); err != nil {
			return nil, 0, err
		}
	}
	if host == "" {
		// Both families, as net.Listen does, unless IPv6 is missing.
		if fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err == nil {
			_ = unix.Close(fd)
			return &unix.SockaddrInet6{Port: p}, unix.AF_INET6, nil
		}
		return &unix.SockaddrInet4{Port: p}, unix.AF_INET, nil
	}
	ip := net.ParseIP(host)
	if ip == nil {
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return nil, 0, fmt.Errorf("resolve %q: %v", host, err)
		}
		ip = ips[0]
	}
	if ip4 := ip.To4(); ip4 != nil {
		sa := &unix.SockaddrInet4{Port: p}
		copy(sa.Addr[:], ip4)
		return sa, unix.AF_INET, nil
	}
	sa := &unix.SockaddrInet6{Port: p}
	copy(sa.Addr[:], ip.To16())
	return sa, unix.AF_INET6, nil
}

func tcpAddr(sa unix.Sockaddr) *net.TCPAddr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(append([]byte(nil), a.Addr[:]...)), Port: a.Port}
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(append([]byte(nil), a.Addr[:]...)), Port: a.Port}
	}
	return &net.TCPAddr{}
}

func listenReusePort(family int, sa unix.Sockaddr) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	setup := func() error {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return err
		}
		if family == unix.AF_INET6 {
			_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
		}
		if err := unix.Bind(fd, sa); err != nil {
			return err
		}
		return unix.Listen(fd, 4096)
	}
	if err := setup(); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// loop is one event loop: a listener, an epoll instance, an eventfd that
// wakes it for shutdown, and its connections.
type loop struct {
	s      *EpollServer
	lfd    int
	epfd   int
	wakefd int
	conns  []*conn // by fd
	nconns int

	mu       sync.Mutex
	stopping bool
	deadline time.Time

	draining bool
	now      time.Time
	nowSec   int64
	date     []byte // "Date: ...\r\n" of nowSec
	events   [epollMaxEvents]unix.EpollEvent
}

type conn struct {
	fd     int
	rbuf   []byte // rbuf[:rn] is unread input
	rn     int
	wbuf   []byte // wbuf[woff:] is output not written yet
	woff   int
	skip   int  // body bytes still to discard
	closeW bool // close once wbuf is written
	linger bool // written and shut down for writing: discarding input until EOF
	outW   bool // waiting for EPOLLOUT (EPOLLIN off)
	// active is when the connection last finished a response or was
	// accepted (idle timeout); begun when the request in progress (or the
	// pending write) began (header timeout), 0 if none.
	active int64
	begun  int64
	remote string
}

func newLoop(s *EpollServer, lfd int) (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		_ = unix.Close(epfd)
		return nil, err
	}
	l := &loop{s: s, lfd: lfd, epfd: epfd, wakefd: wfd}
	for _, fd := range []int{lfd, wfd} {
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			_ = unix.Close(epfd)
			_ = unix.Close(wfd)
			return nil, err
		}
	}
	return l, nil
}

func (l *loop) closeFDs() {
	if l.lfd >= 0 {
		_ = unix.Close(l.lfd)
		l.lfd = -1
	}
	_ = unix.Close(l.epfd)
	_ = unix.Close(l.wakefd)
}

// stop asks the loop to drain until deadline.
func (l *loop) stop(deadline time.Time) {
	l.mu.Lock()
	if !l.stopping || deadline.Before(l.deadline) {
		l.stopping, l.deadline = true, deadline
	}
	l.mu.Unlock()
	var one = [8]byte{1}
	_, _ = unix.Write(l.wakefd, one[:])
}

func (l *loop) tick() {
	l.now = time.Now()
	if sec := l.now.Unix(); sec != l.nowSec {
		l.nowSec = sec
		l.date = append(append(append(l.date[:0], "Date: "...), l.now.UTC().Format(http.TimeFormat)...), "\r\n"...)
	}
}

func (l *loop) run() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer l.closeFDs()
	l.tick()
	lastSweep := l.nowSec
	for {
		timeout := 1000
		if l.draining {
			timeout = 20
		}
		n, err := unix.EpollWait(l.epfd, l.events[:], timeout)
		if err != nil && err != unix.EINTR {
			l.closeAll()
			return fmt.Errorf("epoll_wait: %w", err)
		}
		l.tick()
		for i := range max(n, 0) {
			ev := &l.events[i]
			fd := int(ev.Fd)
			switch fd {
			case l.lfd:
				l.accept()
			case l.wakefd:
				var b [8]byte
				_, _ = unix.Read(l.wakefd, b[:])
				l.beginDrain()
			default:
				if fd < len(l.conns) && l.conns[fd] != nil {
					l.handle(l.conns[fd], ev.Events)
				}
			}
		}
		if l.nowSec != lastSweep || l.draining {
			lastSweep = l.nowSec
			if l.sweep() {
				return nil
			}
		}
	}
}

// beginDrain stops accepting and closes idle connections.
func (l *loop) beginDrain() {
	if l.draining {
		return
	}
	l.draining = true
	if l.lfd >= 0 {
		_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, l.lfd, nil)
		_ = unix.Close(l.lfd)
		l.lfd = -1
	}
	for _, c := range l.conns {
		if c != nil && l.idle(c) {
			// Read what has arrived first: a request begun just before
			// the drain is answered (with Connection: close), not dropped.
			l.handle(c, unix.EPOLLIN)
			if l.conns[c.fd] == c && l.idle(c) {
				l.close(c)
			}
		}
	}
}

func (l *loop) idle(c *conn) bool {
	return c.rn == 0 && c.skip == 0 && c.woff == len(c.wbuf) && !c.linger
}

// lingerTime is how long a connection closed after its last response keeps
// reading (and discarding) input, so that the client gets the response
// rather than a reset for the data it sent after it.
const lingerTime = time.Second

// lingerClose shuts the connection down for writing once its last response
// is written; it is closed at EOF or after lingerTime.
func (l *loop) lingerClose(c *conn) {
	if err := unix.Shutdown(c.fd, unix.SHUT_WR); err != nil {
		l.close(c)
		return
	}
	c.linger, c.begun = true, l.now.UnixNano()
	c.rn, c.skip = 0, 0
}

// sweep closes timed-out connections; while draining it reports whether
// the loop is done.
func (l *loop) sweep() bool {
	now := l.now.UnixNano()
	idle, hdr := int64(l.s.IdleTimeout), int64(l.s.ReadHeaderTimeout)
	for _, c := range l.conns {
		if c == nil {
			continue
		}
		switch {
		case c.linger:
			if now-c.begun > int64(lingerTime) {
				l.close(c)
			}
		case c.begun != 0:
			if hdr > 0 && now-c.begun > hdr {
				l.close(c)
			}
		case l.idle(c):
			if l.draining || idle > 0 && now-c.active > idle {
				l.close(c)
			}
		}
	}
	if !l.draining {
		return false
	}
	l.mu.Lock()
	deadline := l.deadline
	l.mu.Unlock()
	if l.nconns > 0 && l.now.Before(deadline) {
		return false
	}
	l.closeAll()
	return true
}

func (l *loop) closeAll() {
	for _, c := range l.conns {
		if c != nil {
			l.close(c)
		}
	}
}

func (l *loop) accept() {
	for range 64 {
		fd, sa, err := unix.Accept4(l.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			// EAGAIN: none left. EMFILE and the like: try again on the next
			// event (level-triggered).
			return
		}
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		c := &conn{fd: fd, active: l.now.UnixNano()}
		if l.s.r.accessLog != nil {
			c.remote = tcpAddr(sa).String()
		}
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}); err != nil {
			_ = unix.Close(fd)
			continue
		}
		for fd >= len(l.conns) {
			l.conns = append(l.conns, make([]*conn, len(l.conns)+64)...)
		}
		l.conns[fd] = c
		l.nconns++
	}
}

func (l *loop) close(c *conn) {
	if l.conns[c.fd] != c {
		return
	}
	l.conns[c.fd] = nil
	l.nconns--
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	_ = unix.Close(c.fd)
}

func (l *loop) handle(c *conn, events uint32) {
	if c.outW && events&unix.EPOLLOUT == 0 && events&(unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		l.close(c)
		return
	}
	if events&unix.EPOLLOUT != 0 && c.outW {
		if !l.flush(c) {
			return
		}
		if c.closeW {
			l.lingerClose(c)
			return
		}
	}
	if events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR|unix.EPOLLRDHUP) == 0 || c.outW {
		return
	}
	if c.rbuf == nil {
		c.rbuf = make([]byte, epollReadBuf)
	}
	if c.linger {
		n, err := unix.Read(c.fd, c.rbuf)
		if n <= 0 && err != unix.EAGAIN && err != unix.EINTR {
			l.close(c)
		}
		return
	}
	if c.rn == len(c.rbuf) {
		// Full without a complete request: grow to the header limit.
		if len(c.rbuf) >= epollMaxHeader {
			l.fail(c, resp431)
			return
		}
		nb := make([]byte, epollMaxHeader)
		copy(nb, c.rbuf[:c.rn])
		c.rbuf = nb
	}
	n, err := unix.Read(c.fd, c.rbuf[c.rn:])
	if n <= 0 {
		if err == unix.EAGAIN || err == unix.EINTR {
			return
		}
		l.close(c) // EOF or error
		return
	}
	if c.rn == 0 && c.skip == 0 {
		c.begun = l.now.UnixNano()
	}
	c.rn += n
	l.process(c)
	if c.rn == len(c.rbuf) && c.rn >= epollMaxHeader && !c.closeW {
		c.wbuf = append(c.wbuf, resp431.full...)
		c.closeW, c.rn = true, 0
	}
	if c.woff < len(c.wbuf) {
		if !l.flush(c) {
			return
		}
	}
	if c.closeW {
		l.lingerClose(c)
	}
}

// flush writes the pending output. It returns false if some is left (then
// the connection waits for EPOLLOUT) or the connection was closed.
func (l *loop) flush(c *conn) bool {
	for c.woff < len(c.wbuf) {
		n, err := unix.Write(c.fd, c.wbuf[c.woff:])
		if n > 0 {
			c.woff += n
			continue
		}
		if err == unix.EAGAIN {
			if !c.outW {
				c.outW = true
				if c.begun == 0 {
					c.begun = l.now.UnixNano()
				}
				_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: unix.EPOLLOUT, Fd: int32(c.fd)})
			}
			return false
		}
		if err == unix.EINTR {
			continue
		}
		l.close(c)
		return false
	}
	c.wbuf, c.woff = c.wbuf[:0], 0
	if c.outW {
		c.outW = false
		if c.rn == 0 && c.skip == 0 {
			c.begun = 0
		}
		_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(c.fd)})
	}
	return true
}

// fail queues an error response and closes the connection after it.
func (l *loop) fail(c *conn, resp *wire) {
	c.wbuf = append(c.wbuf, resp.full...)
	c.closeW = true
	c.rn, c.skip = 0, 0
	if l.flush(c) {
		l.lingerClose(c)
	}
}

// process answers every complete request in c.rbuf[:c.rn].
func (l *loop) process(c *conn) {
	off := 0
	for off < c.rn && !c.closeW {
		if c.skip > 0 {
			k := min(c.skip, c.rn-off)
			c.skip -= k
			off += k
			continue
		}
		n, bad := l.request(c, c.rbuf[off:c.rn])
		if bad != nil {
			c.wbuf = append(c.wbuf, bad.full...)
			c.closeW = true
			off = c.rn
			break
		}
		if n == 0 {
			break // incomplete
		}
		off += n
	}
	if off > 0 {
		c.rn = copy(c.rbuf, c.rbuf[off:c.rn])
	}
	if c.rn == 0 && c.skip == 0 {
		c.begun = 0
		c.active = l.now.UnixNano()
	}
}

func bstr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// line returns the next line of b (without its "\r\n" or "\n") and the
// length consumed, or n == 0 if b holds no complete line.
func line(b []byte) (ln []byte, n int) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, 0
	}
	if i > 0 && b[i-1] == '\r' {
		return b[:i-1], i + 1
	}
	return b[:i], i + 1
}

func eqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// request parses one request at the start of b and appends its response to
// c.wbuf. It returns the bytes of its head (its body is left to c.skip), 0
// if b does not hold the whole head yet, or the error response to close
// the connection with.
func (l *loop) request(c *conn, b []byte) (int, *wire) {
	// RFC 9112 2.2: ignore empty lines before a request line.
	pos := 0
	for {
		ln, n := line(b[pos:])
		if n == 0 {
			return 0, nil
		}
		if len(ln) > 0 {
			break
		}
		pos += n
	}
	reqLine, n := line(b[pos:])
	head := pos + n
	sp1 := indexByte(reqLine, ' ')
	if sp1 <= 0 {
		return 0, resp400
	}
	method := reqLine[:sp1]
	rest := reqLine[sp1+1:]
	sp2 := indexByte(rest, ' ')
	if sp2 <= 0 {
		return 0, resp400
	}
	target, proto := rest[:sp2], rest[sp2+1:]
	var http10 bool
	switch bstr(proto) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		http10 = true
	default:
		return 0, resp400
	}
	for _, ch := range method {
		if !httpguts.IsTokenRune(rune(ch)) {
			return 0, resp400
		}
	}
	var (
		host, ua      []byte
		hasHost       bool
		closeConn     = http10
		contentLength = -1
	)
	for {
		ln, n := line(b[head:])
		if n == 0 {
			return 0, nil
		}
		head += n
		if len(ln) == 0 {
			break
		}
		colon := indexByte(ln, ':')
		if colon <= 0 {
			return 0, resp400
		}
		name, value := ln[:colon], trimOWS(ln[colon+1:])
		if !httpguts.ValidHeaderFieldName(bstr(name)) || !httpguts.ValidHeaderFieldValue(bstr(value)) {
			return 0, resp400
		}
		switch len(name) {
		case 4:
			if eqFold(name, "host") {
				if hasHost {
					return 0, resp400
				}
				host, hasHost = value, true
			}
		case 10:
			if eqFold(name, "connection") {
				connectionOption(value, http10, &closeConn)
			} else if ua == nil && eqFold(name, "user-agent") {
				ua = value // the first, as Request.UserAgent
			}
		case 14:
			if eqFold(name, "content-length") {
				v, ok := parseLength(value)
				if !ok || contentLength >= 0 && contentLength != v {
					return 0, resp400
				}
				contentLength = v
			}
		case 17:
			if eqFold(name, "transfer-encoding") {
				return 0, resp400
			}
		}
	}
	if contentLength > epollMaxBody {
		return 0, resp413
	}
	if !hasHost && !http10 || !httpguts.ValidHostHeader(bstr(host)) {
		return 0, resp400
	}
	if l.draining {
		closeConn = true
	}

	// The target as net/http reads it (url.ParseRequestURI): the common
	// origin form without escapes directly, anything else through net/url.
	rawTarget := bstr(target)
	hostStr := bstr(host)
	var path, rawQuery string
	if rawTarget == "*" && bstr(method) == "OPTIONS" {
		// net/http's answer to OPTIONS *.
		l.emit(c, respOptions, nil, closeConn)
		return l.done(c, head, contentLength, closeConn)
	}
	// Simple: origin form, no control byte, no escape in the path (the
	// query is kept raw by net/url too).
	simple, q := len(target) > 0 && target[0] == '/', -1
	for i, ch := range target {
		if ch < 0x21 || ch == 0x7f || ch == '%' && q < 0 {
			simple = false
			break
		}
		if ch == '?' && q < 0 {
			q = i
		}
	}
	if simple {
		path = rawTarget
		if q >= 0 {
			path, rawQuery = rawTarget[:q], rawTarget[q+1:]
		}
	} else {
		u, err := url.ParseRequestURI(rawTarget)
		if err != nil {
			return 0, resp400
		}
		path, rawQuery = u.Path, u.RawQuery
		if u.Host != "" {
			hostStr = u.Host
		}
	}

	start := time.Now()
	a := l.s.r.answer(bstr(method), hostStr, path, rawQuery, start)
	l.emit(c, wires[a.resp.status-300], &a, closeConn)
	if bstr(method) != "HEAD" {
		c.wbuf = append(c.wbuf, a.resp.body...)
	}
	r := l.s.r
	r.metrics.observe(a.resp.status, time.Since(start).Seconds())
	if r.accessLog != nil {
		r.logRecord(c.remote, bstr(method), hostStr, rawTarget, bstr(ua), a.resp.status, a.location, start)
	}
	return l.done(c, head, contentLength, closeConn)
}

func (l *loop) done(c *conn, head, contentLength int, closeConn bool) (int, *wire) {
	if contentLength > 0 {
		c.skip = contentLength
	}
	if closeConn {
		c.closeW = true
	}
	return head, nil
}

// emit appends a response head: status line, the answer's headers, Date,
// Connection: close if closing, and the blank line. The body is the
// caller's.
func (l *loop) emit(c *conn, w *wire, a *answer, closeConn bool) {
	c.wbuf = append(c.wbuf, w.status...)
	if a != nil {
		if a.redirect() {
			c.wbuf = append(c.wbuf, "Location: "...)
			c.wbuf = append(c.wbuf, a.location...)
			c.wbuf = append(c.wbuf, "\r\n"...)
		}
		c.wbuf = append(c.wbuf, "Cache-Control: "...)
		c.wbuf = append(c.wbuf, a.cacheControl[0]...)
		c.wbuf = append(c.wbuf, "\r\n"...)
	}
	c.wbuf = append(c.wbuf, w.fixed...)
	c.wbuf = append(c.wbuf, l.date...)
	if closeConn {
		c.wbuf = append(c.wbuf, "Connection: close\r\n"...)
	}
	c.wbuf = append(c.wbuf, "\r\n"...)
}

func indexByte(b []byte, c byte) int { return bytes.IndexByte(b, c) }

// connectionOption applies the tokens of a Connection header.
func connectionOption(v []byte, http10 bool, closeConn *bool) {
	for len(v) > 0 {
		tok := v
		if i := indexByte(v, ','); i >= 0 {
			tok, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		tok = trimOWS(tok)
		switch {
		case eqFold(tok, "close"):
			*closeConn = true
		case http10 && eqFold(tok, "keep-alive"):
			*closeConn = false
		}
	}
}

func parseLength(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	n := 0
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int(ch-'0')
	}
	return n, true
}

// wire is the precomputed bytes of a response: its status line and the
// headers every answer with that status carries (Allow, Retry-After,
// Content-Type, Content-Length), or for an error that closes the
// connection, all of it.
type wire struct {
	status []byte
	fixed  []byte
	full   []byte
}

// wires is the wire of each canned response, by status - 300.
var wires = func() *[300]*wire {
	m := new([300]*wire)
	for _, c := range []*canned{respNotFound, respGone, respBadMethod, respUnavailable, resp301, resp302, resp307, resp308} {
		w := &wire{status: []byte("HTTP/1.1 " + strconv.Itoa(c.status) + " " + http.StatusText(c.status) + "\r\n")}
		switch c {
		case respBadMethod:
			w.fixed = append(w.fixed, "Allow: "+hdrAllow[0]+"\r\n"...)
		case respUnavailable:
			w.fixed = append(w.fixed, "Retry-After: "+hdrRetry[0]+"\r\n"...)
		}
		w.fixed = append(w.fixed, "Content-Type: "+hdrText[0]+"\r\nContent-Length: "+c.length[0]+"\r\n"...)
		m[c.status-300] = w
	}
	return m
}()

func errorWire(status int, body string) *wire {
	return &wire{full: []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)}
}

var (
	resp400     = errorWire(http.StatusBadRequest, "400 Bad Request\n")
	resp413     = errorWire(http.StatusRequestEntityTooLarge, "413 Request Entity Too Large\n")
	resp431     = errorWire(http.StatusRequestHeaderFieldsTooLarge, "431 Request Header Fields Too Large\n")
	respOptions = &wire{status: []byte("HTTP/1.1 200 OK\r\n"), fixed: []byte("Content-Length: 0\r\n")}
)
