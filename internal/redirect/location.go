package redirect

import "github.com/linkforge/linkforge/internal/location"

// Location computes the Location header of a link from its spec.url
// (location.Of): the URL as written, trimmed, with the bytes a URI may not
// hold percent-encoded.
func Location(specURL string) string { return location.Of(specURL) }
