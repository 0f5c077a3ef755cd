package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// idleGrace is the manager's --idle-grace in the uses test: two of its
// redirectors' flush intervals, as the default is.
const idleGrace = 2 * usesFlush

// lastUse is status.lastUsedAt and the resourceVersion of a link of the
// uses namespace.
func (u *usesEnv) lastUse(g Gomega, name string) (lastUsedAt time.Time, rv string, uses string) {
	out, err := u.kubectl("get", "shortlink", "-n", "uses", name, "-o",
		"jsonpath={.status.lastUsedAt} {.metadata.resourceVersion} {.status.uses}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	f := strings.Fields(out)
	if len(f) == 3 {
		at, err := time.Parse(time.RFC3339, f[0])
		g.Expect(err).NotTo(HaveOccurred())
		return at, f[1], f[2]
	}
	g.Expect(f).To(HaveLen(2), out)
	return time.Time{}, f[0], f[1]
}

// uses writes of all replicas (linkforge_redirector_uses_writes_total, any result).
func (u *usesEnv) usesWrites() float64 {
	sum := 0.0
	for _, r := range u.replicas {
		sum += metric(r.probes, "linkforge_redirector_uses_writes_total")
	}
	return sum
}

func (u *usesEnv) testLastUse(t *testing.T) {
	g := newG(t)
	code := u.readyCode(g, "lastuse", "{url: https://example.com/lastuse}")
	path := "/uses/" + code

	// Three GETs on one replica: one batch (or two, if a flush round falls
	// between them), one status write each, lastUsedAt in it.
	writes := u.usesWrites()
	before := time.Now()
	for range 3 {
		g.Expect(u.hit(0, path)).To(Equal(http.StatusFound))
	}
	after := time.Now()
	var at time.Time
	var rv string
	g.Eventually(func(g Gomega) {
		var uses string
		at, rv, uses = u.lastUse(g, "lastuse")
		g.Expect(uses).To(Equal("3"))
		g.Expect(at.IsZero()).To(BeFalse(), "status.lastUsedAt is set")
	}).WithTimeout(loadedMachine * 2 * usesFlush).Should(Succeed())
	// lastUsedAt is the time of the write (docs/uses.md, "Last use"):
	// never before the uses, and at most about a flush interval after them,
	// rounded up to the second.
	g.Expect(at).To(BeTemporally(">=", before.Truncate(time.Second)), "not before the uses")
	g.Expect(at).To(BeTemporally("<=", after.Add(loadedMachine*(usesFlush+time.Second))), "within about a flush interval of them")
	n := u.usesWrites() - writes
	g.Expect(n).To(BeNumerically(">=", 1))
	g.Expect(n).To(BeNumerically("<=", 2), "one write per batch with uses, lastUsedAt in it")
	// Nothing writes the link again: no write of its own for lastUsedAt, and
	// the controller's reconcile of the new lastUsedAt changes nothing.
	g.Consistently(func(g Gomega) string {
		_, cur, _ := u.lastUse(g, "lastuse")
		return cur
	}).WithTimeout(3 * usesFlush).WithPolling(200 * time.Millisecond).Should(Equal(rv))
	g.Expect(u.usesWrites() - writes).To(Equal(n))
	wide := u.mustKubectl("get", "shortlink", "-n", "uses", "lastuse", "-o", "wide")
	g.Expect(wide).To(MatchRegexp(`(?m)^NAME\s+.*\s+USES\s+LAST USED\s+MAX\s+RULES\s+VARIANTS\s+PREVIEWS\s+AGE`))
	g.Expect(wide).To(MatchRegexp(`(?m)^lastuse\s+` + code + `\s+https://example.com/lastuse\s+True\s+Active\s+3\s+\d+s\s+`))

	// An idle link: redirects while used, then 410 Gone on every replica
	// once idleTimeout (+ the manager's grace) has passed since its last
	// use, never before idleTimeout. It is watched with HEAD, which is not
	// a use (a GET would keep it alive). The bound: its lastUsedAt (the
	// write, about a flush interval after the use, rounded up to the
	// second), then idleTimeout and the grace.
	const idle = 5 * time.Second
	code = u.readyCode(g, "idler", "{url: https://example.com/idler, idleTimeout: "+idle.String()+"}")
	path = "/uses/" + code
	g.Expect(u.hit(1, path)).To(Equal(http.StatusFound))
	used := time.Now()
	g.Eventually(func() int { return u.head(u.replicas[2].addr, path) }).WithTimeout(loadedMachine * (usesFlush + time.Second + idle + idleGrace)).
		WithPolling(100 * time.Millisecond).Should(Equal(http.StatusGone))
	g.Expect(time.Now()).To(BeTemporally(">=", used.Add(idle)), "not finished before idleTimeout after its last use")
	// Each replica answers 410 once its informer shows the link expired,
	// the others a little later than replica 2 on a busy machine: waited
	// for with HEAD, since a GET to a replica that has not seen it yet is
	// a redirect and a use (beside stress-ng, the test's own GET made
	// status.uses 2). Then a GET is a 410 too.
	for i, r := range u.replicas {
		g.Eventually(func() int { return u.head(r.addr, path) }).Should(Equal(http.StatusGone), "replica %d", i)
		g.Expect(u.hit(i, path)).To(Equal(http.StatusGone), "replica %d: a GET too", i)
	}
	g.Eventually(func(g Gomega) {
		l, err := u.link("idler")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Status.State).To(Equal("Expired"))
		g.Expect(l.condition("Ready")).To(Equal("True/Expired"))
		g.Expect(l.condition("Expired")).To(Equal("True/IdleExpired"))
		g.Expect(l.Status.Uses).To(Equal(int64(1)), "the 410s are not uses")
	}).Should(Succeed())
	out := u.mustKubectl("get", "shortlink", "-n", "uses", "idler", "-o", "jsonpath={.status.finishedAt}")
	g.Expect(out).NotTo(BeEmpty(), "finishedAt: the reaper deletes it later")
}
