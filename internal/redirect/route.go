package redirect

import "strings"

// view is what a request asks of a link.
type view uint8

const (
	viewRedirect view = iota // /<namespace>/<code>: the redirect
	viewQR                   // /<namespace>/<code>/qr: a QR code of the short URL
	viewPreview              // /<namespace>/<code>+: a page naming the destination
	viewCard                 // the redirect path as a previewer sees it: the link's card (never routed to)
	viewGate                 // the redirect path of a gated link: its password form (never routed to)
	numViews
)

// route is what a request path names.
type route struct {
	// ns and code name a link; ok is false for a path that names none
	// (then ns is the namespace of the vanity host, if any).
	ns, code string
	ok       bool
	view     view
	// root: the path is "/".
	root bool
	// vanity: the link was named by /<code> on its namespace's host.
	vanity bool
	// forward: the path goes on after the code, for a link with
	// spec.forwardPath (forwardRoute).
	forward bool
}

// qrSuffix ends the path of a QR code.
const qrSuffix = "/qr"

// route splits a request path into namespace, code and view:
//
//	/<namespace>/<code>[+|/qr]  on any host
//	/<code>[+|/qr]              on a host a namespace claims
//
// Codes never hold "+" (custom codes are [A-Za-z0-9_-], hashed ones
// Base58), so a trailing "+" is always the preview. /<x>/qr on a vanity
// host is the QR code of the host namespace's code x when it has one, and
// otherwise the long form: code "qr" of namespace x. A path that names no
// link still names the namespace whose fallbacks apply: the one it starts
// with when it has two segments or more, else the host's.
func (r *Redirector) route(host, p string) route {
	if len(p) < 1 || p[0] != '/' {
		return route{}
	}
	if p == "/" {
		ns, _ := r.domains.Lookup(host)
		return route{ns: ns, root: true}
	}
	rest := p[1:]
	v := viewRedirect
	switch {
	case strings.HasSuffix(rest, "+"):
		rest, v = rest[:len(rest)-1], viewPreview
	case strings.HasSuffix(rest, qrSuffix) && strings.Count(rest, "/") == 2:
		rest, v = rest[:len(rest)-len(qrSuffix)], viewQR
	case strings.HasSuffix(rest, qrSuffix) && strings.Count(rest, "/") == 1:
		if ns, ok := r.domains.Lookup(host); ok {
			if code := rest[:len(rest)-len(qrSuffix)]; code != "" && r.index.Lookup(ns, code) != nil {
				return route{ns: ns, code: code, ok: true, view: viewQR, vanity: true}
			}
		}
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		ns, code := rest[:i], rest[i+1:]
		if ns == "" || code == "" || strings.IndexByte(code, '/') >= 0 {
			// Names no link; its fallbacks are the namespace's it starts with.
			return route{ns: ns}
		}
		return route{ns: ns, code: code, ok: true, view: v}
	}
	ns, ok := r.domains.Lookup(host)
	if !ok || rest == "" {
		return route{ns: ns}
	}
	return route{ns: ns, code: rest, ok: true, view: v, vanity: true}
}
