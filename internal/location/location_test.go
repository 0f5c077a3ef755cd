package location

import "testing"

func TestLocation(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://example.com/docs?b=2&a=1", "https://example.com/docs?b=2&a=1"},
		{"  https://example.com/docs \n", "https://example.com/docs"},
		{"https://example.com/a b", "https://example.com/a%20b"},
		{"https://example.com/caf\u00e9?q=\u00fc", "https://example.com/caf%C3%A9?q=%C3%BC"},
		{"https://example.com/%20ok%2f", "https://example.com/%20ok%2f"},
		{"https://example.com/100%", "https://example.com/100%25"},
		{"https://example.com/%zz", "https://example.com/%25zz"},
		{"https://example.com/p#frag#more", "https://example.com/p#frag%23more"},
		{"https://example.com/<a>\"{|}\\^`", "https://example.com/%3Ca%3E%22%7B%7C%7D%5C%5E%60"},
		{"https://user@example.com:8443/p;x=1/*(!)~$'+,=[]", "https://user@example.com:8443/p;x=1/*(!)~$'+,=[]"},
		{"https://example.com/\x00\x7f", "https://example.com/%00%7F"},
	} {
		if got := Of(tc.in); got != tc.want {
			t.Errorf("Of(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLocationUnchangedSharesString(t *testing.T) {
	in := "https://example.com/docs"
	if got := Of(in); got != in {
		t.Fatalf("got %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Of(in) }); n != 0 {
		t.Errorf("Location of a valid URI allocates %v times", n)
	}
}

func TestWithQuery(t *testing.T) {
	for _, tc := range []struct {
		target, query, want string
	}{
		{"https://e.com/p", "b=2", "https://e.com/p?b=2"},
		{"https://e.com/p?a=1", "b=2", "https://e.com/p?a=1&b=2"},
		{"https://e.com/p?a=1#frag", "b=2", "https://e.com/p?a=1&b=2#frag"},
		{"https://e.com/p#frag", "b=2", "https://e.com/p?b=2#frag"},
		{"https://e.com/p#frag?x", "b=2", "https://e.com/p?b=2#frag?x"},
		{"https://e.com/p?", "b=2", "https://e.com/p?b=2"},
		{"https://e.com/p?a=1&", "b=2", "https://e.com/p?a=1&b=2"},
		{"https://e.com/p?a=1", "", "https://e.com/p?a=1"},
		{"https://e.com/p", "q=a b&r=\u00e9", "https://e.com/p?q=a%20b&r=%C3%A9"},
		// A name both carry is sent once, with the request's values (issue 53).
		{"https://e.com/p?utm_source=link&a=1", "utm_source=newsletter", "https://e.com/p?a=1&utm_source=newsletter"},
		{"https://e.com/p?a=1&utm_source=link#f", "utm_source=x&b=2", "https://e.com/p?a=1&utm_source=x&b=2#f"},
		{"https://e.com/p?utm_source=link", "utm_source=x", "https://e.com/p?utm_source=x"},
		{"https://e.com/p?a=1&a=2&b=3", "a=9", "https://e.com/p?b=3&a=9"},
		{"https://e.com/p?tag=x", "tag=a&tag=b", "https://e.com/p?tag=a&tag=b"},
		{"https://e.com/p?utm%5Fsource=link&flag&c", "utm_source=x&flag=1", "https://e.com/p?c&utm_source=x&flag=1"},
		{"https://e.com/p?a+b=1&ab=2", "a%20b=3", "https://e.com/p?ab=2&a%20b=3"},
		{"https://e.com/p?a=1&&b=2", "b", "https://e.com/p?a=1&b"},
		{"https://e.com/p?a=1", "a", "https://e.com/p?a"},
	} {
		loc := Of(tc.target)
		frag := -1
		hasQuery := false
		for i := 0; i < len(loc); i++ {
			if loc[i] == '#' {
				frag = i
				break
			}
			if loc[i] == '?' {
				hasQuery = true
			}
		}
		if got := WithQuery(loc, frag, hasQuery, tc.query); got != tc.want {
			t.Errorf("WithQuery(%q, %q) = %q, want %q", tc.target, tc.query, got, tc.want)
		}
	}
}
