// Command mockoidc is oauth2-proxy's mock OpenID Connect provider
// (github.com/oauth2-proxy/mockoidc) as a process, for the end-to-end test
// of gated links behind a real oauth2-proxy (internal/e2e): it listens on
// --listen, a loopback address, prints one JSON line on stdout,
//
//	{"issuer":"http://127.0.0.1:PORT/oidc","clientID":"...","clientSecret":"...","users":"http://127.0.0.1:PORT/users"}
//
// and signs in, at each login (the authorization endpoint), the next user
// a test queued by posting {"email":"...","groups":["..."]} to the users
// URL (204; 400 with a message for a bad user, 405 for another method),
// or mockoidc's default user (jane.doe@example.com, groups engineering and
// design) when none is queued. Subjects are opaque (sub-alice), as most
// providers' are. It signs in whoever is queued without a password: it
// refuses to listen anywhere but loopback. SIGTERM or SIGINT stops it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/oauth2-proxy/mockoidc"
)

// maxUserBytes bounds a queued user's JSON: an email and a few groups.
const maxUserBytes = 64 << 10

// queued is the body of a POST to /users.
type queued struct {
	Email  string   `json:"email"`
	Groups []string `json:"groups"`
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "Loopback address (host:port; port 0 picks a free one) to serve the provider and /users on.")
	flag.Parse()
	if err := run(*listen); err != nil {
		fmt.Fprintln(os.Stderr, "mockoidc:", err)
		os.Exit(1)
	}
}

func run(listen string) error {
	ap, err := netip.ParseAddrPort(listen)
	if err != nil || !ap.Addr().IsLoopback() {
		return fmt.Errorf("--listen=%q: want a loopback address and port, such as 127.0.0.1:0 (it signs in anyone queued, without a password)", listen)
	}
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", ap.String())
	if err != nil {
		return err
	}
	// mockoidc's own Start serves only its endpoints; the same ones here,
	// beside /users, on one port. m.Server set before it serves is what
	// mockoidc reads its issuer from.
	mux := http.NewServeMux()
	for path, h := range map[string]http.HandlerFunc{
		mockoidc.AuthorizationEndpoint: m.Authorize,
		mockoidc.TokenEndpoint:         m.Token,
		mockoidc.UserinfoEndpoint:      m.Userinfo,
		mockoidc.JWKSEndpoint:          m.JWKS,
		mockoidc.DiscoveryEndpoint:     m.Discovery,
	} {
		mux.Handle(path, logged(h))
	}
	mux.HandleFunc("/users", func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, req.Method+": only POST queues a user", http.StatusMethodNotAllowed)
			return
		}
		u, err := readUser(w, req)
		if err != nil {
			log.Printf("POST /users refused: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m.QueueUser(u)
		log.Printf("queued %s %v for the next login", u.Email, u.Groups)
		w.WriteHeader(http.StatusNoContent)
	})
	m.Server = &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	served := make(chan error, 1)
	go func() { served <- m.Server.Serve(ln) }()
	out, err := json.Marshal(map[string]string{
		"issuer": m.Issuer(), "clientID": m.ClientID, "clientSecret": m.ClientSecret, "users": m.Addr() + "/users",
	})
	if err != nil {
		return err
	}
	fmt.Println(string(out))

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-served:
		return err
	case <-stop:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return m.Server.Shutdown(ctx)
}

// readUser reads a POST's user to queue: an email, and groups without
// commas (oauth2-proxy joins them with commas in X-Forwarded-Groups).
func readUser(w http.ResponseWriter, req *http.Request) (*mockoidc.MockUser, error) {
	var q queued
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxUserBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		return nil, fmt.Errorf(`want {"email":"...","groups":["..."]}: %w`, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("want one JSON object, and nothing after it")
	}
	local, _, ok := strings.Cut(q.Email, "@")
	if !ok || local == "" {
		return nil, fmt.Errorf("email %q: want an address such as alice@example.com", q.Email)
	}
	for _, g := range q.Groups {
		if g == "" || strings.Contains(g, ",") {
			return nil, fmt.Errorf("group %q: want a name, without commas", g)
		}
	}
	// The subject is an opaque id, as most providers' are, and not the
	// email: oauth2-proxy's X-Forwarded-User is the subject.
	return &mockoidc.MockUser{Subject: "sub-" + local, Email: q.Email, EmailVerified: true, PreferredUsername: local, Groups: q.Groups}, nil
}

// logged logs each request to the provider's endpoints (stderr), for a
// failed test's log.
func logged(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		log.Printf("%s %s", req.Method, req.URL.Path)
		h(w, req)
	})
}
