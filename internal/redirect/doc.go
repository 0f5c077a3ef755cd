// Package redirect is linkforge's redirector: it keeps an in-memory index
// (namespace, code) -> target fed by informers on ShortLinks and Namespaces,
// and answers GET /<namespace>/<code> (and /<code> on a namespace's domain)
// from it, without touching the API server on the request path.
//
// It holds:
//
//   - the index and what feeds it: informers, the transform of a ShortLink
//     into a Link, namespaces' domains and fallbacks (index.go,
//     linkwatch.go, transform.go, domains.go, fallback.go, manager.go);
//   - the HTTP answers: the request path's route, the redirect and its
//     Location, a link's rules and split (route.go, answer.go, handler.go,
//     location.go, routing.go); uses, also those taken for peer replicas,
//     and click events (clicks.go, peers.go); the access log and metrics
//     (accesslog.go, metrics.go); the fasthttp server (server.go,
//     readyield*.go);
//   - the glue of the answers that are not redirects: which link, state,
//     URL and card a preview page, a card or a QR code shows, and their
//     status and headers (preview.go, card.go, qrcode.go).
//
// Those pages are rendered by package pages, within its render budget:
// they cost a thousand redirects each, and nothing on the redirect path
// calls into it.
package redirect
