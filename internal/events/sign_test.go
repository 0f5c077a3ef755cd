package events

import (
	"flag"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestStandardWebhooksLibraryVerifies: the Standard Webhooks scheme's own
// Go library (a receiver's) verifies the signed requests of a sink whose
// key file holds the secret as the scheme writes it, with whsec_ or
// without: both base64, both decoded. Our Verify agrees.
func TestStandardWebhooksLibraryVerifies(t *testing.T) {
	const secret = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // the scheme's example: base64 of 24 bytes
	for _, text := range []string{"whsec_" + secret, secret, secret + "\n"} {
		recv := newCEReceiver(t)
		var f Flags
		fs := flag.NewFlagSet("redirector", flag.ContinueOnError)
		f.Bind(fs)
		if err := fs.Parse([]string{"--events-cloudevents-url=" + recv.URL, "--events-signing-key-file=" + secretFile(t, text)}); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.Config()
		if err != nil {
			t.Fatal(err)
		}
		test := testConfig(recv.URL)
		test.CloudEvents = cfg.CloudEvents
		p := start(t, test)
		offer(t, p, 0, 15)
		waitFor(t, func() bool { return countsOf(p, SinkCloudEvents).sent == 15 }, "15 events sent")
		wh, err := standardwebhooks.NewWebhook(strings.TrimSpace(text))
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range recv.got() {
			if err := wh.Verify(req.body, req.header); err != nil {
				t.Errorf("key file %q: the Standard Webhooks library does not verify the request: %v", text, err)
			}
			if err := Verify(cfg.CloudEvents.SigningKey, req.header, req.body, time.Now(), time.Minute); err != nil {
				t.Errorf("key file %q: Verify: %v", text, err)
			}
		}
	}
}
