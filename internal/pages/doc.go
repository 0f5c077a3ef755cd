// Package pages holds what the redirector answers that is not a redirect
// and costs more than one: the preview page of a link (Preview), the card
// link previewers are shown (Card, CardCache), QR codes of short URLs
// (QRDrawer, QRParams), and the render budget they share (Budget).
//
// It is apart from internal/redirect because it costs differently: a
// redirect takes about 200 ns and allocates nothing, a page or a QR code
// costs a thousand redirects, so pages render only within a Budget (a
// refused render is answered 503 at once; nothing queues), and what has
// been rendered is kept. Nothing on the redirect path calls into this
// package: the redirector decides what a page says (which link, which
// state, which URL, which card) and answers it; pages renders it.
package pages
