package plugin

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/explain"
)

const openUsage = `open NAME [--browser]

Prints the short URL of the ShortLink NAME; with --browser, opens it too
(with xdg-open, or open on macOS). The exit status is 1 when the link is not
Active: it has no code yet, it keeps an earlier code, it is not active yet,
or it expired or ran out of uses; the message says what a click gets then.
`

// browserCommand is the program that opens a URL; tests replace it.
var browserCommand = func() (string, error) {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	return exec.LookPath(name)
}

func runOpen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand(verbOpen, openUsage, stderr)
	browser := cmd.flags.Bool("browser", false, "open the short URL in the default browser")
	rest, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageErrorf(cmd.name, "open takes one NAME, got %d argument(s)", len(rest))
	}
	cl, namespace, err := cmd.client()
	if err != nil {
		return err
	}
	link, err := getLink(ctx, cl, namespace, rest[0])
	if err != nil {
		return err
	}
	ref := fmt.Sprintf("shortlink %s/%s", link.Namespace, link.Name)
	u := shortURL(link, stderr)
	if u == "" {
		return notReadyErrorf("%s has no short URL yet: %s", ref, readyMessage(link))
	}
	_, _ = fmt.Fprintln(stdout, u)
	if a := describe(ctx, cl, link, time.Now()); a.State != string(linkv1.StateActive) && a.State != explain.StateNotServed {
		// Finished, or not active yet, on the clock the redirectors read:
		// what a click gets now.
		return notReadyErrorf("%s is %s: %s", ref, a.State, a.Sentence(link.Status.Code))
	}
	if link.Status.State != linkv1.StateActive {
		return notReadyErrorf("%s is %s: %s", ref, state(link), readyMessage(link))
	}
	if !*browser {
		return nil
	}
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return notReadyErrorf("cannot open %s in a browser: it has no host (start the manager with --redirect-base-url)", u)
	}
	opener, err := browserCommand()
	if err != nil {
		return notReadyErrorf("cannot open a browser: %v; open %s yourself", err, u)
	}
	if err := exec.CommandContext(ctx, opener, u).Run(); err != nil {
		return notReadyErrorf("%s %s: %v", opener, u, err)
	}
	return nil
}

func readyMessage(l *linkv1.ShortLink) string {
	if c := meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady); c != nil {
		return c.Message
	}
	return "no controller has reconciled it yet (is the linkforge manager running?)"
}
