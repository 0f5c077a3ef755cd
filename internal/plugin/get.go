package plugin

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

const getUsage = `get [NAME] [-A]

Lists the ShortLinks of the namespace (of all namespaces with -A), or shows
the ShortLink NAME: short URL, code, target, uses/limit, last use, expiry
and state.
`

func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("get", getUsage, stderr)
	allNamespaces := cmd.flags.BoolP("all-namespaces", "A", false, "list the ShortLinks of every namespace")
	rest, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(rest) > 1 {
		return usageErrorf(cmd.name, "get takes at most one NAME, got %d", len(rest))
	}
	if len(rest) == 1 && *allNamespaces {
		return usageErrorf(cmd.name, "get NAME looks in one namespace: leave out -A, or give -n NAMESPACE")
	}
	cl, namespace, err := cmd.client()
	if err != nil {
		return err
	}

	var links []linkv1.ShortLink
	if len(rest) == 1 {
		link, err := getLink(ctx, cl, namespace, rest[0])
		if err != nil {
			return err
		}
		links = append(links, *link)
	} else {
		var list linkv1.ShortLinkList
		opts := []client.ListOption{client.InNamespace(namespace)}
		where := inNamespace(namespace)
		if *allNamespaces {
			opts, where = nil, "all namespaces"
		}
		if err := cl.List(ctx, &list, opts...); err != nil {
			return clusterError(err, "list", where)
		}
		if len(list.Items) == 0 {
			if *allNamespaces {
				_, _ = fmt.Fprintln(stderr, "No shortlinks found.")
			} else {
				_, _ = fmt.Fprintf(stderr, "No shortlinks found in %s namespace.\n", namespace)
			}
			return nil
		}
		links = list.Items
	}
	printTable(stdout, links, *allNamespaces)
	return nil
}

// getLink reads one link; a missing one is exit status 1.
func getLink(ctx context.Context, cl client.Client, namespace, name string) (*linkv1.ShortLink, error) {
	var link linkv1.ShortLink
	err := cl.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &link)
	switch {
	case apierrors.IsNotFound(err) && !isResourceNotFound(err):
		return nil, notReadyErrorf("shortlink %q not found in namespace %s (list them with: %s get -n %s)", name, namespace, Name(), namespace)
	case err != nil:
		return nil, clusterError(err, "get", inNamespace(namespace))
	}
	return &link, nil
}

func printTable(w io.Writer, links []linkv1.ShortLink, withNamespace bool) {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if withNamespace {
		_, _ = fmt.Fprint(tw, "NAMESPACE\t")
	}
	_, _ = fmt.Fprintln(tw, "NAME\tSHORT URL\tCODE\tTARGET\tUSES\tLAST USED\tEXPIRES\tSTATE")
	now := time.Now()
	for i := range links {
		l := &links[i]
		if withNamespace {
			_, _ = fmt.Fprintf(tw, "%s\t", l.Namespace)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			l.Name, orNone(linkURL(l)), orNone(l.Status.Code), l.Spec.URL, uses(l), lastUsed(l, now), expiry(l), state(l))
	}
	_ = tw.Flush()
}

// linkURL is status.shortURL, else the redirector's path of the code
// (the manager runs without --redirect-base-url), else empty.
func linkURL(l *linkv1.ShortLink) string {
	switch {
	case l.Status.ShortURL != "":
		return l.Status.ShortURL
	case l.Status.Code != "":
		return "/" + l.Namespace + "/" + l.Status.Code
	}
	return ""
}

// shortURL is linkURL for a link that holds its code; when it is only a path
// it says why on stderr.
func shortURL(l *linkv1.ShortLink, stderr io.Writer) string {
	u := linkURL(l)
	if l.Status.ShortURL == "" && u != "" {
		_, _ = fmt.Fprintf(stderr, "note: status.shortURL is empty: the linkforge manager runs without --redirect-base-url, "+
			"so here is the path the redirector serves the link at, on its own host: %s\n", u)
	}
	return u
}

func uses(l *linkv1.ShortLink) string {
	n := strconv.FormatInt(l.Status.Uses, 10)
	if l.Spec.MaxUses == nil {
		return n
	}
	return n + "/" + strconv.FormatInt(*l.Spec.MaxUses, 10)
}

// lastUsed is how long ago status.lastUsedAt was, as kubectl prints ages
// ("never" before the first use is written; the redirectors write it with
// their batched uses, so it trails a use by up to a flush interval).
func lastUsed(l *linkv1.ShortLink, now time.Time) string {
	if l.Status.LastUsedAt == nil {
		return "never"
	}
	return duration.HumanDuration(max(now.Sub(l.Status.LastUsedAt.Time), 0)) + " ago"
}

func expiry(l *linkv1.ShortLink) string {
	at := l.Status.ExpiresAt
	if at == nil {
		t, ok := l.Expiry()
		if !ok {
			return "never"
		}
		return t.UTC().Format(time.RFC3339)
	}
	return at.UTC().Format(time.RFC3339)
}

func state(l *linkv1.ShortLink) string {
	if l.Status.State != "" {
		return string(l.Status.State)
	}
	if meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady) == nil {
		return "<not reconciled>"
	}
	return "<unknown>"
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
