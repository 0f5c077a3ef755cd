package plugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/qr"
)

const qrUsage = `qr NAME [-o FILE] [--format png|svg] [--size 256] [--margin 4] [--invert] [--base-url URL]

Draws a QR code of the short URL of the ShortLink NAME (the same drawing
the redirector serves at /<namespace>/<code>/qr). With -o it writes the
file (PNG, or SVG for a .svg name or --format svg); without it, a terminal
gets the code drawn in text, and a pipe or a file the image's bytes. A link
that is not active yet (Scheduled) can be drawn, to print it ahead.
`

// isTerminal reports whether w is a terminal; tests replace it.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

type qrOptions struct {
	output  string
	format  string
	size    int
	margin  int
	invert  bool
	baseURL string
}

func runQR(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand(verbQR, qrUsage, stderr)
	var o qrOptions
	f := cmd.flags
	f.StringVarP(&o.output, "output", "o", "", "write the image to this file")
	f.StringVar(&o.format, "format", "", "png or svg (default: from the -o file's extension, else png)")
	f.IntVar(&o.size, "size", qr.DefaultSize, fmt.Sprintf("width of the image in pixels, %d to %d", qr.MinSize, qr.MaxSize))
	f.IntVar(&o.margin, "margin", qr.DefaultMargin, fmt.Sprintf("quiet zone around the code, in modules, %d to %d", qr.MinMargin, qr.MaxMargin))
	f.BoolVar(&o.invert, "invert", false, "in a terminal, draw for a light background")
	f.StringVar(&o.baseURL, "base-url", "", "the redirector's public URL, e.g. https://go.example.com, when status.shortURL is empty")
	rest, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageErrorf(cmd.name, "qr takes one NAME, got %d argument(s)", len(rest))
	}
	svg, err := o.svg()
	if err != nil {
		return err
	}
	if err := qr.CheckSize(o.size, o.margin); err != nil {
		return usageErrorf(cmd.name, "%v", err)
	}
	toTerminal := o.output == "" && isTerminal(stdout)
	if toTerminal && f.Changed("format") {
		return usageErrorf(cmd.name, "refusing to write %s bytes to a terminal: give -o FILE, or redirect the output (> code.%s)",
			strings.ToUpper(o.format), o.format)
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
	u, err := o.shortURL(link, ref)
	if err != nil {
		return err
	}
	if s := link.Status.State; s != linkv1.StateActive && s != linkv1.StateScheduled {
		_, _ = fmt.Fprintf(stderr, "warning: %s is %s: %s\n", ref, state(link), readyMessage(link))
	}
	code, err := qr.Encode(u)
	if err != nil {
		return notReadyErrorf("%v", err)
	}
	if toTerminal {
		_, _ = fmt.Fprint(stdout, code.Terminal(o.margin, o.invert))
		_, _ = fmt.Fprintln(stdout, u)
		return nil
	}
	var image []byte
	if svg {
		image, err = code.SVG(o.size, o.margin)
	} else {
		image, err = code.PNG(o.size, o.margin)
	}
	if err != nil {
		return usageErrorf(cmd.name, "%v", err)
	}
	if o.output == "" {
		_, err := stdout.Write(image)
		return err
	}
	if err := os.WriteFile(o.output, image, 0o644); err != nil {
		return &exitError{code: ExitNotReady, msg: fmt.Sprintf("writing %s: %v", o.output, err)}
	}
	_, _ = fmt.Fprintf(stderr, "wrote a QR code of %s to %s\n", u, o.output)
	return nil
}

// svg tells the format: --format, else the -o file's extension, else png.
func (o *qrOptions) svg() (bool, error) {
	switch o.format {
	case "svg":
		return true, nil
	case "png":
		return false, nil
	case "":
		return strings.EqualFold(filepath.Ext(o.output), ".svg"), nil
	}
	return false, usageErrorf(verbQR, "invalid --format %q: use png or svg", o.format)
}

// shortURL is the URL to draw: status.shortURL, else --base-url with the
// link's path.
func (o *qrOptions) shortURL(link *linkv1.ShortLink, ref string) (string, error) {
	if link.Status.Code == "" {
		return "", notReadyErrorf("%s has no code to draw: %s", ref, readyMessage(link))
	}
	if link.Status.ShortURL != "" {
		return link.Status.ShortURL, nil
	}
	if o.baseURL == "" {
		return "", notReadyErrorf("%s has no short URL: the linkforge manager runs without --redirect-base-url, and a QR code of the path /%s/%s opens nothing. "+
			"Give the redirector's public URL with --base-url", ref, link.Namespace, link.Status.Code)
	}
	if !strings.HasPrefix(o.baseURL, "http://") && !strings.HasPrefix(o.baseURL, "https://") {
		return "", usageErrorf(verbQR, "invalid --base-url %q: use an http or https URL, e.g. https://go.example.com", o.baseURL)
	}
	return strings.TrimRight(o.baseURL, "/") + "/" + link.Namespace + "/" + link.Status.Code, nil
}
