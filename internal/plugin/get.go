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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/explain"
	"github.com/linkforge/linkforge/internal/rules"
)

const getUsage = `get [NAME] [-A]

Lists the ShortLinks of the namespace (of all namespaces with -A), or shows
the ShortLink NAME: short URL, code, target, uses/limit, last use, expiry
and state, and for NAME what a click on its short URL gets.
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
	now := time.Now()
	printTable(stdout, links, *allNamespaces, now)
	if len(rest) == 1 {
		printAnswer(ctx, cl, stdout, &links[0], now)
	}
	return nil
}

// printAnswer says what a click on the link's short URL gets, as the
// redirectors answer it now (internal/explain), and where its rules and
// split send the others.
func printAnswer(ctx context.Context, cl client.Client, w io.Writer, l *linkv1.ShortLink, now time.Time) {
	if l.Status.Code == "" {
		_, _ = fmt.Fprintf(w, "\n%s\n", readyMessage(l))
		return
	}
	a := describe(ctx, cl, l, now)
	if a.State == explain.StateNotServed {
		_, _ = fmt.Fprintf(w, "\n%s\n", readyMessage(l))
		return
	}
	_, _ = fmt.Fprintf(w, "\n%s.\n", a.Sentence(l.Status.Code))
	if a.State == string(linkv1.StateActive) && (len(l.Spec.Rules) > 0 || len(l.Spec.Variants) > 0) {
		for _, line := range rules.Describe(&l.Spec) {
			_, _ = fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

// describe is what the redirectors answer for l at now (internal/explain),
// with the fallbacks of its namespace's annotations when they matter and
// the user may read the namespace (many may not: then they are unknown).
func describe(ctx context.Context, cl client.Client, l *linkv1.ShortLink, now time.Time) explain.Answer {
	x := explain.FromShortLink(l)
	a := explain.Describe(x, now, explain.Fallbacks{})
	if a.State == string(linkv1.StateActive) {
		return a
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"})
	if err := cl.Get(ctx, types.NamespacedName{Name: l.Namespace}, ns); err != nil {
		return a
	}
	return explain.Describe(x, now, explain.NamespaceFallbacks(ns.Annotations))
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

func printTable(w io.Writer, links []linkv1.ShortLink, withNamespace bool, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if withNamespace {
		_, _ = fmt.Fprint(tw, "NAMESPACE\t")
	}
	_, _ = fmt.Fprintln(tw, "NAME\tSHORT URL\tCODE\tTARGET\tUSES\tLAST USED\tEXPIRES\tSTATE")
	for i := range links {
		l := &links[i]
		if withNamespace {
			_, _ = fmt.Fprintf(tw, "%s\t", l.Namespace)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			l.Name, orNone(linkURL(l)), orNone(l.Status.Code), l.Spec.URL, uses(l), lastUsed(l, now), expiry(l), liveState(l, now))
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

// liveState is the link's state as the redirectors answer it now: the
// controller writes Expired at the expiry, or Active at activatesAt, a
// moment after they start to answer so (they read their clocks); the
// states of a link they do not serve as its status says (Kept, Pending,
// Conflict...) are the controller's.
func liveState(l *linkv1.ShortLink, now time.Time) string {
	switch l.Status.State {
	case linkv1.StateActive, linkv1.StateScheduled:
		if l.ServesConfirmedCode() {
			return explain.Describe(explain.FromShortLink(l), now, explain.Fallbacks{}).State
		}
	}
	return state(l)
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
