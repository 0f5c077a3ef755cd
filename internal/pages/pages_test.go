package pages

import (
	"strings"
	"testing"
	"time"
)

// What a card or a preview page inserts is escaped for its context: no
// script, no attribute broken out of.
func TestCardEscapes(t *testing.T) {
	c := &Card{Title: `Launch <script>alert(1)</script> & "more"`, Description: CardText("Line one\n  line two"), Image: "https://img.example.com/c.png?a=1&b=2"}
	page, err := c.Render(NewBudget(1, 1, time.Now))
	if err != nil {
		t.Fatal(err)
	}
	body := string(page)
	for _, want := range []string{
		`<title>Launch &lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;more&#34;</title>`,
		`<meta property="og:title" content="Launch &lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;more&#34;">`,
		`<meta property="og:description" content="Line one line two">`,
		`<meta property="og:image" content="https://img.example.com/c.png?a=1&amp;b=2">`,
		`<meta name="twitter:card" content="summary_large_image">`,
		`<meta name="robots" content="noindex, nofollow">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the card lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script>") {
		t.Errorf("a script:\n%s", body)
	}
	page, _ = (&DefaultCard).Render(NewBudget(1, 1, time.Now))
	if body := string(page); !strings.Contains(body, `<meta name="twitter:card" content="summary">`) || strings.Contains(body, "og:image") {
		t.Errorf("the default card:\n%s", body)
	}
}

func TestPreviewEscapes(t *testing.T) {
	p := &Preview{
		Path: "/ns/<b>", Destination: "https://example.com/a?x=1&y='2'", Redirects: true,
		State: "Active", Detail: "It answers 308 Permanent Redirect.",
		Routing: []string{`<img src=x onerror=alert(1)>`},
		Card:    &Card{Title: `"T"`, Image: "javascript:alert(1)"},
	}
	page, err := p.Render(NewBudget(1, 1, time.Now))
	if err != nil {
		t.Fatal(err)
	}
	body := string(page)
	for _, want := range []string{
		`<title>Short link /ns/&lt;b&gt;</title>`,
		`<a href="https://example.com/a?x=1&amp;y=%272%27" rel="nofollow noopener noreferrer">https://example.com/a?x=1&amp;y=&#39;2&#39;</a>`,
		"<p>It redirects to:</p>",
		"State: <strong>Active</strong>. It answers 308 Permanent Redirect.",
		"<li>&lt;img src=x onerror=alert(1)&gt;</li>",
		"<strong>&#34;T&#34;</strong>",
		"Image: <code>javascript:alert(1)</code>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "<img") || strings.Contains(body, "y='2'") {
		t.Errorf("script or unescaped text:\n%s", body)
	}
	// A link that redirected once, without its destination shown.
	page, _ = (&Preview{Path: "/ns/old", State: "Expired"}).Render(NewBudget(1, 1, time.Now))
	if body := string(page); strings.Contains(body, "<a ") || strings.Contains(body, "redirect") || strings.Contains(body, "previewers") {
		t.Errorf("a page without a destination nor a card:\n%s", body)
	}
}

func TestCardCache(t *testing.T) {
	c := NewCardCache()
	c.Add("ns", "1", []byte("v1"))
	if p, ok := c.Get("ns", "1"); !ok || string(p) != "v1" {
		t.Errorf("%q %v", p, ok)
	}
	if _, ok := c.Get("ns", "2"); ok {
		t.Error("another version of the namespace is kept")
	}
	c.Add("big", "1", make([]byte, cardCacheBytes))
	if _, ok := c.Get("big", "1"); ok {
		t.Error("a card larger than the cache is kept")
	}
}

func TestCardText(t *testing.T) {
	if got := CardText("  a\n\tb  c "); got != "a b c" {
		t.Errorf("%q", got)
	}
}
