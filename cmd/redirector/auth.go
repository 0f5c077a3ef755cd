package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/linkforge/linkforge/internal/clientaddr"
)

// authOptions are the flags of gated links' sign-in gate (spec.access
// users and groups): who the trusted auth proxy says is signed in.
type authOptions struct {
	userHeader, groupsHeader, proxies, signInURL string
}

func (a *authOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&a.userHeader, "auth-user-header", "",
		"Request header in which the auth proxy of --auth-proxies names the signed-in user (oauth2-proxy with OIDC: X-Forwarded-Email, the user's email; its X-Forwarded-User is the provider's subject id), for gated links' spec.access.users and groups. Empty (the default): nobody is ever signed in, and links gated by users or groups open for nobody but by their password.")
	fs.StringVar(&a.groupsHeader, "auth-groups-header", "",
		"Request header in which the auth proxy names the signed-in user's groups, comma-separated (oauth2-proxy: X-Forwarded-Groups). Needs --auth-user-header.")
	fs.StringVar(&a.proxies, "auth-proxies", "",
		"Comma-separated CIDRs (or addresses) of the auth proxies in front of the redirector: the only peers (the socket's) whose --auth-user-header and --auth-groups-header are read. Needed with --auth-user-header: a header read from any peer would let anyone sign in as anybody.")
	fs.StringVar(&a.signInURL, "auth-sign-in-url", "",
		"Where a request that is not signed in is sent (302) by a link gated by users or groups, e.g. https://auth.example.com/oauth2/start?rd={url}: {url} becomes the short URL (query-escaped), to come back to. Empty (the default): 403. Someone signed in whom the link does not allow gets 403 either way (sent to sign in, they would come back as the same person, for ever).")
}

// check reads --auth-proxies and checks the flags go together.
func (a *authOptions) check() (clientaddr.Proxies, error) {
	p, err := clientaddr.ParseProxies(a.proxies)
	if err != nil {
		return p, fmt.Errorf("--auth-proxies: %w", err)
	}
	var errs []error
	switch {
	case a.userHeader != "" && p.Empty():
		errs = append(errs, fmt.Errorf("--auth-user-header=%s needs --auth-proxies: the CIDRs of the auth proxies that set it; it is read from those peers only, so that no client can sign itself in", a.userHeader))
	case a.userHeader == "" && (a.groupsHeader != "" || !p.Empty()):
		errs = append(errs, errors.New("--auth-groups-header and --auth-proxies need --auth-user-header: the header in which the auth proxy names the signed-in user"))
	}
	errs = append(errs, checkHeaderFlags(map[string]string{"auth-user-header": a.userHeader, "auth-groups-header": a.groupsHeader}))
	if a.signInURL != "" {
		u, err := url.Parse(strings.ReplaceAll(a.signInURL, "{url}", "x"))
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--auth-sign-in-url=%q: want an absolute http or https URL", a.signInURL))
		}
	}
	return p, errors.Join(errs...)
}
