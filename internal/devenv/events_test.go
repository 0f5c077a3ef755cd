package devenv

import (
	"net/http"
	"strings"
	"testing"

	"github.com/linkforge/linkforge/internal/testenv"
)

func TestEventLines(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string
		fails      bool
	}{
		{name: "a batch", body: `[ {"id": "1", "data": {"code": "a"}}, {"id":"2"} ]`,
			want: []string{`{"id":"1","data":{"code":"a"}}`, `{"id":"2"}`}},
		{name: "one structured event", body: "\n{\"id\": \"1\"}\n", want: []string{`{"id":"1"}`}},
		{name: "an empty batch", body: `[]`, want: []string{}},
		{name: "empty", body: ``, fails: true},
		{name: "not JSON", body: `id=1`, fails: true},
		{name: "a batch of strings", body: `["x"]`, fails: true},
		{name: "a broken batch", body: `[{"id":`, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EventLines([]byte(tc.body))
			if tc.fails {
				if err == nil {
					t.Fatalf("EventLines(%q) = %q, want an error", tc.body, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") || len(got) != len(tc.want) {
				t.Errorf("EventLines(%q) = %q, want %q", tc.body, got, tc.want)
			}
		})
	}
}

func TestEventPrinterPrintsWhatTheSinkSends(t *testing.T) {
	var out testenv.SyncBuffer
	p, err := StartEventPrinter(&out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	post := func(contentType, body string) int {
		t.Helper()
		resp, err := http.Post(p.URL, contentType, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if s := post("application/cloudevents-batch+json", `[{"id":"1"},{"id":"2"}]`); s != http.StatusOK {
		t.Errorf("a batch: %d, want 200", s)
	}
	if s := post("application/cloudevents+json", `{"id":"3"}`); s != http.StatusOK {
		t.Errorf("one event: %d, want 200", s)
	}
	if s := post("text/plain", `hello`); s != http.StatusBadRequest {
		t.Errorf("not an event: %d, want 400", s)
	}
	resp, err := http.Get(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}
	want := "event: {\"id\":\"1\"}\nevent: {\"id\":\"2\"}\nevent: {\"id\":\"3\"}\nevents: not a CloudEvent or a batch of them (text/plain): want a JSON object or array\n"
	if got := out.String(); got != want {
		t.Errorf("printed:\n%s\nwant:\n%s", got, want)
	}
}
