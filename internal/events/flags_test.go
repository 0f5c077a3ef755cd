package events

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func parseFlags(t *testing.T, args ...string) (Config, *Flags, error) {
	t.Helper()
	var f Flags
	fs := flag.NewFlagSet("redirector", flag.ContinueOnError)
	f.Bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	c, err := f.Config()
	return c, &f, err
}

func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFlagsDefaultsAreOff(t *testing.T) {
	c, f, err := parseFlags(t)
	if err != nil || c.Enabled() {
		t.Fatalf("no flags: %+v, %v; want events off", c, err)
	}
	if f.Buffer != DefaultBuffer || f.MaxBatch != DefaultMaxBatch || f.FlushInterval != DefaultFlushInterval || f.KeepClientAddress {
		t.Errorf("defaults %+v", f)
	}
}

func TestFlagsConfig(t *testing.T) {
	key, token := secretFile(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"), secretFile(t, "t0ken\n")
	c, _, err := parseFlags(t,
		"--events-cloudevents-url=https://events.example.com/in", "--events-cloudevents-single",
		"--events-signing-key-file="+key, "--events-bearer-token-file="+token,
		"--events-otlp-endpoint=http://collector:4318", "--events-otlp-bearer-token-file="+token, "--events-otlp-gzip",
		"--events-buffer=50000", "--events-max-batch=100", "--events-flush-interval=250ms",
		"--events-keep-client-address")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Enabled() || c.CloudEvents.URL != "https://events.example.com/in" || !c.CloudEvents.Single ||
		len(c.CloudEvents.SigningKey) != 24 || c.CloudEvents.BearerToken != "t0ken" ||
		c.OTLP.Endpoint != "http://collector:4318" || c.OTLP.BearerToken != "t0ken" || !c.OTLP.Gzip ||
		c.Buffer != 50000 || c.MaxBatch != 100 || c.FlushInterval != 250*time.Millisecond || !c.KeepClientAddress {
		t.Errorf("config %+v", c)
	}
}

func TestFlagsErrors(t *testing.T) {
	empty := secretFile(t, "\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--events-signing-key-file=/x"}, "need --events-cloudevents-url"},
		{[]string{"--events-otlp-gzip"}, "need --events-otlp-endpoint"},
		{[]string{"--events-cloudevents-url=http://r/", "--events-signing-key-file=/no/such/file"}, "--events-signing-key-file: read the events credential"},
		{[]string{"--events-cloudevents-url=http://r/", "--events-bearer-token-file=" + empty}, "is empty"},
		{[]string{"--events-cloudevents-url=http://r/", "--events-signing-key-file=" + secretFile(t, "c2hvcnQ=")}, "5 bytes once base64-decoded: give 16 at least"},
		{[]string{"--events-cloudevents-url=http://r/", "--events-signing-key-file=" + secretFile(t, "my raw key of 32 bytes, or so...")}, "--events-signing-key-file: the signing key is not base64"},
		{[]string{"--events-cloudevents-url=http://r/", "--events-signing-key-file=" + secretFile(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS")}, "the signing key is not base64"},
		{[]string{"--events-otlp-endpoint=http://c:4318", "--events-buffer=0"}, "must be positive"},
		{[]string{"--events-otlp-endpoint=unix:///x"}, "want an http or https URL"},
	} {
		_, _, err := parseFlags(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}
