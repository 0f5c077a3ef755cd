package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// Link previewers as they fetch a pasted link (GET), with their agents as
// the vendors document them (internal/agent/testdata holds the sources).
var e2ePreviewers = []string{
	"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
	"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
	"WhatsApp/2.23.20.0",
	"LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
	"Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
	"TelegramBot (like TwitterBot)",
	"Twitterbot/1.0",
	"Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5",
}

const (
	e2eBrowser = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15"
	e2eMonitor = "Mozilla/5.0 (compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)"
)

// getAs sends a GET with the User-Agent ua to replica i: its status,
// Location and body (at most 64 KiB).
func (u *usesEnv) getAs(i int, path, ua string) (int, string, string) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+u.replicas[i%len(u.replicas)].addr+path, nil)
	req.Header.Set("User-Agent", ua)
	resp, err := u.client.Do(req)
	if err != nil {
		return 0, "", err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

// previewStatus is what the previewers' test reads of a link's status.
type previewStatus struct {
	Uses             int64  `json:"uses"`
	PreviewerFetches int64  `json:"previewerFetches"`
	LastUsedAt       string `json:"lastUsedAt"`
	State            string `json:"state"`
	VariantUses      []struct {
		URL  string `json:"url"`
		Uses int64  `json:"uses"`
	} `json:"variantUses"`
}

func (u *usesEnv) previewStatus(g Gomega, name string) previewStatus {
	out, err := u.kubectl("get", "shortlink", "-n", "uses", name, "-o", "jsonpath={.status}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var st previewStatus
	g.Expect(json.Unmarshal([]byte(out), &st)).To(Succeed(), out)
	return st
}

// testPreviewers: previewers never spend a use nor see a limited link's
// destination; people get every use; unlimited links unfurl and count
// people only; a monitor does not keep an idle link alive.
func (u *usesEnv) testPreviewers(t *testing.T) {
	t.Run("a single-use link fetched twice by each previewer, over three replicas: cards; then one person gets the one redirect", func(t *testing.T) {
		g := newG(t)
		code := u.readyCode(g, "invite", "{url: https://example.com/invite-secret, maxUses: 1}")
		path := "/uses/" + code
		fetches := 0
		for i, ua := range e2ePreviewers {
			for j := range 2 {
				st, loc, body := u.getAs(i+j, path, ua)
				g.Expect(st).To(Equal(http.StatusOK), "%q", ua)
				g.Expect(loc).To(BeEmpty(), "%q", ua)
				g.Expect(body).To(ContainSubstring(`property="og:title"`), "%q", ua)
				g.Expect(body).NotTo(ContainSubstring("invite-secret"), "%q", ua)
				fetches++
			}
		}
		// A client that says it is Slack's previewer, on every replica: the card.
		for i := range u.replicas {
			st, loc, _ := u.getAs(i, path, "Slackbot")
			g.Expect(st).To(Equal(http.StatusOK))
			g.Expect(loc).To(BeEmpty())
			fetches++
		}
		st, loc, _ := u.getAs(1, path, e2eBrowser)
		g.Expect(st).To(Equal(http.StatusFound))
		g.Expect(loc).To(Equal("https://example.com/invite-secret"))
		for i := range u.replicas {
			g.Eventually(func() int { st, _, _ := u.getAs(i, path, e2eBrowser); return st }).Should(Equal(http.StatusGone), "replica %d", i)
		}
		g.Eventually(func(g Gomega) {
			s := u.previewStatus(g, "invite")
			g.Expect(s.Uses).To(Equal(int64(1)))
			g.Expect(s.PreviewerFetches).To(Equal(int64(fetches)))
			g.Expect(s.State).To(Equal("Exhausted"))
		}).WithTimeout(loadedMachine * 2 * usesFlush).Should(Succeed()) // written within two flush intervals (docs/uses.md)
	})

	t.Run("an unlimited link unfurls for previewers and counts people only; its split counts people only", func(t *testing.T) {
		g := newG(t)
		code := u.readyCode(g, "unfurl", "{url: https://example.com/unfurl, variants: [{url: https://example.com/unfurl-b, weight: 100}]}")
		path := "/uses/" + code
		for i, ua := range e2ePreviewers[:4] {
			st, loc, _ := u.getAs(i, path, ua)
			g.Expect(st).To(Equal(http.StatusFound))
			g.Expect(loc).To(Equal("https://example.com/unfurl"), "previewers go to spec.url, outside the split")
		}
		for i := range 5 {
			st, loc, _ := u.getAs(i, path, e2eBrowser)
			g.Expect(st).To(Equal(http.StatusFound))
			g.Expect(loc).To(Equal("https://example.com/unfurl-b"))
		}
		g.Eventually(func(g Gomega) {
			s := u.previewStatus(g, "unfurl")
			g.Expect(s.Uses).To(Equal(int64(5)))
			g.Expect(s.PreviewerFetches).To(Equal(int64(4)))
			for _, vu := range s.VariantUses {
				if strings.HasSuffix(vu.URL, "-b") {
					g.Expect(vu.Uses).To(Equal(int64(5)))
				} else {
					g.Expect(vu.Uses).To(BeZero(), vu.URL)
				}
			}
		}).WithTimeout(loadedMachine * 2 * usesFlush).Should(Succeed()) // written within two flush intervals
	})

	t.Run("an uptime monitor does not keep an idle link alive", func(t *testing.T) {
		g := newG(t)
		const idle = 4 * time.Second
		code := u.readyCode(g, "watched", "{url: https://example.com/watched, idleTimeout: "+idle.String()+"}")
		path := "/uses/" + code
		// The monitor polls every replica until the link finishes: had its
		// GETs been uses, it never would. The link finishes within its
		// idleTimeout and the manager's grace (docs/expiry.md), and a
		// replica sees it within a flush interval and the rounding of a
		// second, as testLastUse's idle link.
		g.Eventually(func() int {
			st, _, _ := u.getAs(int(time.Now().UnixMilli()/100), path, e2eMonitor)
			return st
		}).WithTimeout(loadedMachine * (usesFlush + time.Second + idle + idleGrace)).WithPolling(100 * time.Millisecond).Should(Equal(http.StatusGone))
		g.Eventually(func(g Gomega) {
			s := u.previewStatus(g, "watched")
			g.Expect(s.State).To(Equal("Expired"))
			g.Expect(s.Uses).To(BeZero())
			g.Expect(s.LastUsedAt).To(BeEmpty())
			g.Expect(s.PreviewerFetches).To(BeNumerically(">", 0))
		}).WithTimeout(loadedMachine * 2 * usesFlush).Should(Succeed())
	})
}
