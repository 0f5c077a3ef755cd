package rules

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/linkforge/linkforge/internal/agent"
)

// TestDeviceOf: a bot's device is bot whatever it names; a person's (or an
// unknown client's) is its platform's.
func TestDeviceOf(t *testing.T) {
	platforms := []struct {
		ua     string
		device Device // of a person's agent naming it
	}{
		{"Mozilla/5.0", DeviceUnknown},
		{iphoneUA, DeviceIOS},
		{pixelUA, DeviceAndroid},
		{winUA, DeviceDesktop},
	}
	for _, p := range platforms {
		if got := Classify([]byte(p.ua)); got != p.device {
			t.Errorf("Classify(%q) = %s, want %s", p.ua, got, p.device)
		}
	}
	for _, tc := range []struct {
		ua   string
		want Device
	}{
		{"", DeviceBot}, // every browser sends an agent
		{botUA, DeviceBot},
		{"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.6167.160 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", DeviceBot},
		{"curl/8.5.0", DeviceBot},
		{"Microsoft Office Existence Discovery", DeviceBot},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 12_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/16B92 [Pinterest/iOS]", DeviceIOS},
		{"Mozilla/5.0 (Linux; Android 9; CUBOT X19) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/110.0.5481.65 Mobile Safari/537.36", DeviceAndroid},
		{"-", DeviceUnknown},
	} {
		a := agent.Classify([]byte(tc.ua))
		if got := DeviceOf(a); got != tc.want {
			t.Errorf("DeviceOf(%q: %s) = %s, want %s", tc.ua, a.Class(), got, tc.want)
		}
		if got := Classify([]byte(tc.ua)); got != tc.want {
			t.Errorf("Classify(%q) = %s, want %s", tc.ua, got, tc.want)
		}
	}
}

// TestClassifyCorpus: the device of every agent of internal/agent's corpus
// is what its class and platform make it.
func TestClassifyCorpus(t *testing.T) {
	f, err := os.Open("../agent/testdata/user-agents.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	counts := map[Device]int{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "#") {
			continue
		}
		cols := strings.Split(text, "\t")
		if len(cols) < 3 {
			t.Fatalf("line %d: %d columns", line, len(cols))
		}
		want := DeviceBot
		if class := cols[1]; class == "person" || class == "unknown" {
			want = map[string]Device{"ios": DeviceIOS, "android": DeviceAndroid, "desktop": DeviceDesktop, "unknown": DeviceUnknown}[cols[2]]
		}
		counts[want]++
		if got := Classify([]byte(cols[0])); got != want {
			t.Errorf("line %d: %q is %s, want %s", line, cols[0], got, want)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for d := range numDevices {
		if counts[d] < 5 {
			t.Errorf("the corpus has %d %s agents, want at least 5", counts[d], d)
		}
	}
}

// TestClassifyDoesNotAllocate: rules' Classify adds nothing to agent's.
func TestClassifyDoesNotAllocate(t *testing.T) {
	ua := []byte(iphoneUA)
	if n := testing.AllocsPerRun(100, func() { Classify(ua) }); n != 0 {
		t.Errorf("Classify allocates %v times", n)
	}
}
