package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/linkforge/linkforge/internal/claim"
)

// TestPlanGatewayHosts: each host goes to the namespace that wins its claim,
// invalid hosts and losers are refused with a reason, and at the limit the
// oldest claims get the listeners whatever the map's order.
func TestPlanGatewayHosts(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name    string
		claims  map[string]claim.Domain
		free    int
		hosts   string // ns=host,... in order
		refused string // ns:reason,... sorted by namespace
	}{
		{"two", map[string]claim.Domain{"b": {Host: "b.example", Created: at(1)}, "a": {Host: "a.example", Created: at(2)}}, 64,
			"b=b.example,a=a.example", ""},
		{"conflict", map[string]claim.Domain{"late": {Host: "h.example", Created: at(2)}, "early": {Host: "h.example", Created: at(1)}}, 64,
			"early=h.example", "late:" + ReasonHostConflict},
		{"invalid", map[string]claim.Domain{"ip": {Host: "10.0.0.1", Created: at(1)}, "star": {Host: "*.example", Created: at(1)}, "ok": {Host: "ok.example", Created: at(1)}}, 64,
			"ok=ok.example", "ip:" + ReasonHostInvalid + ",star:" + ReasonHostInvalid},
		{"limit", map[string]claim.Domain{"c": {Host: "c.example", Created: at(3)}, "a": {Host: "a.example", Created: at(1)}, "b": {Host: "b.example", Created: at(2)}}, 2,
			"a=a.example,b=b.example", "c:" + ReasonListenerLimit},
		{"same age at the limit: smaller name", map[string]claim.Domain{"y": {Host: "y.example", Created: at(1)}, "x": {Host: "x.example", Created: at(1)}}, 1,
			"x=x.example", "y:" + ReasonListenerLimit},
		{"no room", map[string]claim.Domain{"a": {Host: "a.example", Created: at(1)}}, -3, "", "a:" + ReasonListenerLimit},
		{"name clash", map[string]claim.Domain{"a": {Host: "a-b.example", Created: at(1)}, "b": {Host: "a.b.example", Created: at(2)}}, 64,
			"a=a-b.example", "b:" + ReasonListenerNameUsed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 { // map order varies: the plan must not
				hosts, refused := planGatewayHosts(tc.claims, tc.free, DefaultGatewayCertificateSecret)
				var h, r []string
				for _, x := range hosts {
					h = append(h, x.Namespace+"="+x.Host)
					if want := "linkforge-" + strings.ReplaceAll(x.Host, ".", "-"); x.Listener != want || x.Secret != want {
						t.Fatalf("%s: listener %q, secret %q, want %q", x.Host, x.Listener, x.Secret, want)
					}
				}
				for _, x := range refused {
					r = append(r, x.Namespace+":"+x.Reason)
					if !strings.Contains(x.Message, x.Host) {
						t.Fatalf("message %q does not name the host", x.Message)
					}
				}
				if got := strings.Join(h, ","); got != tc.hosts {
					t.Fatalf("hosts %s, want %s", got, tc.hosts)
				}
				if got := strings.Join(r, ","); got != tc.refused {
					t.Fatalf("refused %s, want %s", got, tc.refused)
				}
			}
		})
	}
}

func TestGatewayObjectNames(t *testing.T) {
	long := strings.Repeat("abcdefghi.", 25) + "example" // 257 characters
	long2 := strings.Repeat("abcdefghi.", 25) + "exampla"
	a, b := gatewayObjectName(GatewayObjectPrefix, long), gatewayObjectName(GatewayObjectPrefix, long2)
	for _, n := range []string{a, b, secretName(DefaultGatewayCertificateSecret, long)} {
		if len(n) > 253 || !hostnamePattern.MatchString(n) {
			t.Errorf("%q (%d) is not a valid name", n, len(n))
		}
	}
	if a == b {
		t.Errorf("two long hosts share the name %q", a)
	}
	for _, tc := range []struct {
		template string
		ok       bool
	}{{"linkforge-{host}", true}, {"tls-{host}-cert", true}, {"fixed", false}, {"Bad_{host}", false}} {
		if err := checkSecretTemplate(tc.template); (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.template, err)
		}
	}
	if why := validListenerHost("go.example.com"); why != "" {
		t.Error(why)
	}
	for _, h := range []string{"::1", "1.2.3.4", "a_b.example", strings.Repeat("a", 254), "*.example", ""} {
		if validListenerHost(h) == "" {
			t.Errorf("%q taken as a listener's hostname", h)
		}
	}
}

// FuzzPlanGatewayHosts: whatever the claims, each is either programmed or
// refused once, no more than free hosts get listeners, a host has one
// listener, and every name is one the Gateway API takes.
func FuzzPlanGatewayHosts(f *testing.F) {
	f.Add("a.example b.example a.example 10.0.0.1 *.x a-b.c a.b-c", uint8(3))
	f.Add("", uint8(0))
	f.Fuzz(func(t *testing.T, hostList string, free uint8) {
		claims := map[string]claim.Domain{}
		for i, h := range strings.Fields(hostList) {
			if h = claim.NormalizeHost(h); h != "" {
				claims[fmt.Sprintf("ns-%d", i)] = claim.Domain{Host: h, Created: time.Unix(int64(i%3), 0)}
			}
		}
		hosts, refused := planGatewayHosts(claims, int(free), DefaultGatewayCertificateSecret)
		if len(hosts) > int(free) || len(hosts)+len(refused) != len(claims) {
			t.Fatalf("%d claims, free %d: %d hosts, %d refused", len(claims), free, len(hosts), len(refused))
		}
		seen := map[string]bool{}
		for _, h := range hosts {
			if seen[h.Host] || seen[h.Listener] {
				t.Fatalf("host %q or listener %q twice", h.Host, h.Listener)
			}
			seen[h.Host], seen[h.Listener] = true, true
			if claims[h.Namespace].Host != h.Host || validListenerHost(h.Host) != "" {
				t.Fatalf("%+v", h)
			}
			for _, n := range []string{h.Listener, h.Secret} {
				if len(n) > 253 || !hostnamePattern.MatchString(n) {
					t.Fatalf("name %q", n)
				}
			}
		}
		for _, r := range refused {
			if claims[r.Namespace].Host != r.Host || r.Reason == "" || r.Message == "" {
				t.Fatalf("%+v", r)
			}
		}
	})
}
