package plugin

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/qr/qrtest"
)

// asTerminal makes runVerb's stdout a terminal for the test.
func asTerminal(t *testing.T) {
	was := isTerminal
	isTerminal = func(io.Writer) bool { return true }
	t.Cleanup(func() { isTerminal = was })
}

func TestQR(t *testing.T) {
	freshNamespaces(t)
	const target = "https://example.com/qr"
	want := wantURL(t, target)
	runVerb(t, adminKube, "create", "qr", target, "-n", linked).expect(t, ExitOK, want+"\n")
	dir := t.TempDir()

	t.Run("to a file: PNG, or SVG by extension or --format", func(t *testing.T) {
		file := filepath.Join(dir, "qr.png")
		runVerb(t, adminKube, "qr", "qr", "-n", linked, "-o", file, "--size", "300").
			expect(t, ExitOK, "", "wrote a QR code of "+want+" to "+file)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := qrtest.ScanPNG(t, b); got != want {
			t.Errorf("the file reads %q, want %q", got, want)
		}
		svg := filepath.Join(dir, "qr.svg")
		runVerb(t, adminKube, "qr", "qr", "-n", linked, "-o", svg).expect(t, ExitOK, "")
		if b, _ := os.ReadFile(svg); !bytes.HasPrefix(b, []byte("<svg ")) {
			t.Errorf("%s is not an SVG: %.40q", svg, b)
		}
		other := filepath.Join(dir, "code.img")
		runVerb(t, adminKube, "qr", "qr", "-n", linked, "-o", other, "--format", "svg").expect(t, ExitOK, "")
		if b, _ := os.ReadFile(other); !bytes.HasPrefix(b, []byte("<svg ")) {
			t.Errorf("--format svg: not an SVG: %.40q", b)
		}
	})

	t.Run("to a pipe: the PNG's bytes", func(t *testing.T) {
		r := runVerb(t, adminKube, "qr", "qr", "-n", linked)
		r.expect(t, ExitOK, "*")
		if got := qrtest.ScanPNG(t, []byte(r.stdout)); got != want {
			t.Errorf("stdout reads %q, want %q", got, want)
		}
	})

	t.Run("to a terminal: drawn in text, never an image's bytes", func(t *testing.T) {
		asTerminal(t)
		r := runVerb(t, adminKube, "qr", "qr", "-n", linked)
		r.expect(t, ExitOK, "*")
		if !strings.Contains(r.stdout, "█") || !strings.HasSuffix(r.stdout, "\n"+want+"\n") || strings.Contains(r.stdout, "PNG") {
			t.Errorf("not a text QR code followed by the URL:\n%s", r.stdout)
		}
		for _, f := range []string{"png", "svg"} {
			runVerb(t, adminKube, "qr", "qr", "-n", linked, "--format", f).
				expect(t, ExitUsage, "", "refusing to write "+strings.ToUpper(f)+" bytes to a terminal: give -o FILE")
		}
	})

	t.Run("bad flags", func(t *testing.T) {
		runVerb(t, adminKube, "qr", "qr", "-n", linked, "--size", "10").
			expect(t, ExitUsage, "", "size must be a number of pixels from 64 to 1024, got 10")
		runVerb(t, adminKube, "qr", "qr", "-n", linked, "--format", "gif").expect(t, ExitUsage, "", `invalid --format "gif"`)
		runVerb(t, adminKube, "qr", "-n", linked).expect(t, ExitUsage, "", "qr takes one NAME")
		runVerb(t, adminKube, "qr", "nope", "-n", linked).expect(t, ExitNotReady, "", `shortlink "nope" not found`)
	})
}

func TestQRWithoutBaseURL(t *testing.T) {
	freshNamespaces(t)
	const target = "https://example.com/qr-nobase"
	runVerb(t, adminKube, "create", "qr-nobase", target, "-n", nocontroller, "--timeout", "0").expect(t, ExitOK, "")
	runVerb(t, adminKube, "qr", "qr-nobase", "-n", nocontroller).expect(t, ExitNotReady, "", "has no code to draw")

	// What the controller writes without a redirect base URL.
	l := getLinkT(t, nocontroller, "qr-nobase")
	l.Status.State, l.Status.Code = linkv1.StateScheduled, "qrcode"
	l.Status.ObservedGeneration, l.Status.ConfirmedGeneration = l.Generation, l.Generation
	meta.SetStatusCondition(&l.Status.Conditions, metav1.Condition{
		Type: linkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: linkv1.ReasonScheduled,
		Message: "redirects later", ObservedGeneration: l.Generation,
	})
	if err := admin.Status().Update(suiteCtx, l); err != nil {
		t.Fatal(err)
	}
	runVerb(t, adminKube, "qr", "qr-nobase", "-n", nocontroller).
		expect(t, ExitNotReady, "", "has no short URL", "Give the redirector's public URL with --base-url")
	r := runVerb(t, adminKube, "qr", "qr-nobase", "-n", nocontroller, "--base-url", "https://go.example.org/")
	r.expect(t, ExitOK, "*")
	if strings.Contains(r.stderr, "warning") {
		t.Errorf("a Scheduled link is drawn without a warning: %s", r.stderr)
	}
	if got := qrtest.ScanPNG(t, []byte(r.stdout)); got != "https://go.example.org/nocontroller/qrcode" {
		t.Errorf("reads %q", got)
	}
}

func TestCreateActivationAndDedupFlags(t *testing.T) {
	freshNamespaces(t)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	r := runVerb(t, adminKube, "create", "later", "https://example.com/later", "-n", linked, "--activates-at", at, "--dedup-policy", "Never")
	r.expect(t, ExitOK, wantURL(t, "https://example.com/later")+"\n", "created", "note: code", "redirects from "+at)
	l := getLinkT(t, linked, "later")
	if l.Spec.ActivatesAt == nil || l.Spec.ActivatesAt.UTC().Format(time.RFC3339) != at || l.Spec.DedupPolicy != linkv1.DedupNever {
		t.Errorf("spec %+v", l.Spec)
	}
	runVerb(t, adminKube, "create", "later", "https://example.com/later", "-n", linked).
		expect(t, ExitNotReady, "", "activatesAt: "+at+" (wanted <unset>)", `dedupPolicy: "Never" (wanted <unset>)`)
	runVerb(t, adminKube, "create", "x", "https://example.com/x", "--dedup-policy", "Sometimes", "--dry-run=client").
		expect(t, ExitUsage, "", `invalid --dedup-policy "Sometimes": use IfSameTarget or Never`)
	runVerb(t, adminKube, "create", "x", "https://example.com/x", "--activates-at", "tomorrow", "--dry-run=client").
		expect(t, ExitUsage, "", `invalid --activates-at "tomorrow"`)
	runVerb(t, "", "create", "x", "https://example.com/x", "--activates-at", "2030-01-02T15:04:05Z", "--dedup-policy", "IfSameTarget", "--dry-run=client").
		expect(t, ExitOK, "apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata:\n  name: x\nspec:\n  activatesAt: \"2030-01-02T15:04:05Z\"\n  dedupPolicy: IfSameTarget\n  url: https://example.com/x\n")
}
