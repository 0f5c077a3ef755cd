package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/claim"
	"github.com/linkforge/linkforge/internal/rules"
	"github.com/linkforge/linkforge/internal/shortcode"
)

const createUsage = `create NAME URL [--code CODE] [--ttl DURATION | --expires-at TIME] [--max-uses N]
       [--status 301|302|307|308] [--forward-query] [--activates-at TIME] [--dedup-policy IfSameTarget|Never]
       [--rule 'url=URL COND...']... [--variant 'url=URL weight=N']... [--variants-end 'at=TIME url=URL']
       [--expired-url URL] [--forward-path]
       [--card-title TEXT] [--card-description TEXT] [--card-image URL]
       [--password-prompt | --password-hash HASH] [--allow-user USER]... [--allow-group GROUP]...
       [--overwrite] [--timeout 30s] [--dry-run=client|server [-o yaml|json]]

Creates the ShortLink NAME for URL, waits until the controller has made it
Ready and prints its short URL. With --dry-run=client it only prints the
manifest (for a GitOps repository) and talks to no cluster; with
--dry-run=server the API server checks the write (its rules, admission
policies) and keeps nothing.

An existing ShortLink NAME with the same spec is left alone; one with another
spec is refused unless --overwrite. Before it writes, create warns when
--code is held by another link: a new link would serve nothing, and an
existing one keeps serving the code it holds until --code is free.
` + routingUsage

// codePattern is spec.code's pattern in the CRD.
var codePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// pollInterval is how often create reads the link while it waits.
var pollInterval = 250 * time.Millisecond

type createOptions struct {
	code         string
	ttl          time.Duration
	expiresAt    string
	maxUses      int64
	status       int32
	forwardQuery bool
	activatesAt  string
	dedupPolicy  string
	overwrite    bool
	timeout      time.Duration
	dryRun       string
	output       string
	rules        []string
	variants     []string
	variantsEnd  string
	expiredURL   string
	forwardPath  bool
	card         linkv1.LinkCard
	access       accessOptions
}

func runCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("create", createUsage, stderr)
	var o createOptions
	f := cmd.flags
	f.StringVar(&o.code, "code", "", "a custom code instead of the computed one ([A-Za-z0-9_-], at most 64)")
	f.DurationVar(&o.ttl, "ttl", 0, "the link expires this long after its creation, e.g. 168h")
	f.StringVar(&o.expiresAt, "expires-at", "", "the link expires at this RFC 3339 time, e.g. 2030-01-02T15:04:05Z")
	f.Int64Var(&o.maxUses, "max-uses", 0, "the link serves at most this many redirects (default: unlimited)")
	f.Int32Var(&o.status, "status", 0, "the HTTP status of the redirect: 301, 302, 307 or 308 (default 302)")
	f.BoolVar(&o.forwardQuery, "forward-query", false, "append the short URL's query string to the target")
	f.StringVar(&o.activatesAt, "activates-at", "", "the link redirects from this RFC 3339 time on (404 before), e.g. 2030-01-02T15:04:05Z")
	f.StringVar(&o.dedupPolicy, "dedup-policy", "", "IfSameTarget shares the code of links with the same target, Never gives this link its own (default: the manager's --dedup)")
	f.StringArrayVar(&o.rules, "rule", nil, "a redirect rule 'url=URL COND...' (repeat for more, in order; see below)")
	f.StringArrayVar(&o.variants, "variant", nil, "a weighted variant 'url=URL weight=N' (repeat for more)")
	f.StringVar(&o.variantsEnd, "variants-end", "", "end the split 'at=TIME url=URL': from TIME on, the clicks no rule matches go to URL (the link's URL or a variant's)")
	f.StringVar(&o.expiredURL, "expired-url", "", "where clicks go once the link has finished, instead of 410 Gone")
	f.BoolVar(&o.forwardPath, "forward-path", false, "append the rest of the short URL's path to the target")
	f.StringVar(&o.card.Title, "card-title", "", "the title link previewers (Slack, WhatsApp...) show instead of following the link (spec.card)")
	f.StringVar(&o.card.Description, "card-description", "", "the text under the card's title")
	f.StringVar((*string)(&o.card.Image), "card-image", "", "the URL of the card's image (http or https)")
	o.access.flags(f)
	f.BoolVar(&o.overwrite, "overwrite", false, "replace the spec of an existing ShortLink NAME that differs")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for the link to be Ready; 0 does not wait")
	f.StringVar(&o.dryRun, "dry-run", "none", `"client" prints the manifest and talks to no cluster; "server" has the API server check the write and keep nothing`)
	f.StringVarP(&o.output, "output", "o", "", "with --dry-run: print the manifest, yaml (default) or json")

	rest, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(rest) != 2 {
		return usageErrorf(cmd.name, "create takes NAME and URL, got %d argument(s)", len(rest))
	}
	name, rawURL := rest[0], rest[1]
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return usageErrorf(cmd.name, "invalid NAME %q: %s", name, strings.Join(errs, "; "))
	}
	link, err := o.link(name, rawURL, f.Changed)
	if err != nil {
		return err
	}
	if _, err := shortcode.Canonicalize(rawURL); err != nil {
		// %q keeps control characters of a bad URL off the terminal.
		return notReadyErrorf("invalid URL %q: %v", rawURL, err)
	}

	switch o.dryRun {
	case "client":
		link.Namespace = cmd.explicitNamespace()
		return printManifest(stdout, link, o.output)
	case "server":
	case "none", "":
		if o.output != "" {
			return usageErrorf(cmd.name, "-o is for --dry-run (it prints the manifest); create prints the short URL")
		}
	default:
		return usageErrorf(cmd.name, `invalid --dry-run %q: use "client" to print the manifest, "server" to have the API server check it, or leave it out`, o.dryRun)
	}

	cl, namespace, err := cmd.client()
	if err != nil {
		return err
	}
	link.Namespace = namespace
	dryRun := o.dryRun == "server"
	if err := apply(ctx, cl, link, o.overwrite, dryRun, stderr); err != nil {
		return err
	}
	if dryRun {
		if o.output == "" {
			return nil
		}
		return printManifest(stdout, link, o.output)
	}
	if o.timeout == 0 {
		return nil
	}
	ready, err := waitReady(ctx, cl, link, o.timeout)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintln(stdout, shortURL(ready, stderr))
	if ready.Status.State != linkv1.StateActive {
		// Ready, but it does not redirect now (not active yet, or
		// finished as its spec asks): what a click gets.
		_, _ = fmt.Fprintf(stderr, "note: %s\n", readyMessage(ready))
	}
	return nil
}

// link builds the ShortLink of the flags; changed reports the flags given.
func (o *createOptions) link(name, rawURL string, changed func(string) bool) (*linkv1.ShortLink, error) {
	link := &linkv1.ShortLink{
		TypeMeta:   metav1.TypeMeta{APIVersion: linkv1.GroupVersion.String(), Kind: "ShortLink"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       linkv1.ShortLinkSpec{URL: rawURL, Code: o.code, ForwardQuery: o.forwardQuery},
	}
	if changed("code") && !codePattern.MatchString(o.code) {
		return nil, usageErrorf("create", "invalid --code %q: use 1 to 64 letters, digits, _ or -", o.code)
	}
	if changed("ttl") && changed("expires-at") {
		return nil, usageErrorf("create", "give at most one of --ttl and --expires-at: both set the link's expiry")
	}
	if changed("ttl") {
		if o.ttl <= 0 {
			return nil, usageErrorf("create", "invalid --ttl %s: use a positive duration such as 168h or 30m", o.ttl)
		}
		link.Spec.TTL = &metav1.Duration{Duration: o.ttl}
	}
	if changed("expires-at") {
		at, err := time.Parse(time.RFC3339, o.expiresAt)
		if err != nil {
			return nil, usageErrorf("create", "invalid --expires-at %q: use an RFC 3339 time such as 2030-01-02T15:04:05Z", o.expiresAt)
		}
		t := metav1.NewTime(at.UTC())
		link.Spec.ExpiresAt = &t
	}
	if changed("activates-at") {
		at, err := time.Parse(time.RFC3339, o.activatesAt)
		if err != nil {
			return nil, usageErrorf("create", "invalid --activates-at %q: use an RFC 3339 time such as 2030-01-02T15:04:05Z", o.activatesAt)
		}
		t := metav1.NewTime(at.UTC())
		link.Spec.ActivatesAt = &t
	}
	if changed("dedup-policy") {
		p := linkv1.DedupPolicy(o.dedupPolicy)
		if p != linkv1.DedupIfSameTarget && p != linkv1.DedupNever {
			return nil, usageErrorf("create", "invalid --dedup-policy %q: use IfSameTarget or Never", o.dedupPolicy)
		}
		link.Spec.DedupPolicy = p
	}
	if changed("max-uses") {
		if o.maxUses < 1 {
			return nil, usageErrorf("create", "invalid --max-uses %d: use 1 or more, or leave it out for no limit", o.maxUses)
		}
		link.Spec.MaxUses = &o.maxUses
	}
	if changed("status") {
		if !slices.Contains([]int32{301, 302, 307, 308}, o.status) {
			return nil, usageErrorf("create", "invalid --status %d: use 301, 302, 307 or 308", o.status)
		}
		link.Spec.RedirectStatus = o.status
	}
	if err := o.setRouting(&link.Spec); err != nil {
		return nil, err
	}
	if err := o.setCard(&link.Spec, changed); err != nil {
		return nil, err
	}
	if err := o.access.set(&link.Spec); err != nil {
		return nil, err
	}
	return link, nil
}

// setCard sets spec.card from the --card-* flags, checked as the CRD
// checks them, so that a bad card is refused before it reaches a cluster.
func (o *createOptions) setCard(spec *linkv1.ShortLinkSpec, changed func(string) bool) error {
	if !changed("card-title") && !changed("card-description") && !changed("card-image") {
		return nil
	}
	c := o.card
	switch {
	case changed("card-title") && (c.Title == "" || len(c.Title) > linkv1.MaxCardTitle):
		return usageErrorf("create", "invalid --card-title: use 1 to %d characters", linkv1.MaxCardTitle)
	case changed("card-description") && (c.Description == "" || len(c.Description) > linkv1.MaxCardDescription):
		return usageErrorf("create", "invalid --card-description: use 1 to %d characters", linkv1.MaxCardDescription)
	case strings.ContainsFunc(c.Title, isControl):
		return usageErrorf("create", "invalid --card-title %q: no control characters such as line breaks", c.Title)
	case strings.ContainsFunc(c.Description, func(r rune) bool { return isControl(r) && r != '\t' && r != '\n' }):
		return usageErrorf("create", "invalid --card-description %q: no control characters but tabs and line breaks", c.Description)
	}
	if changed("card-image") {
		if _, err := shortcode.Canonicalize(string(c.Image)); err != nil {
			return usageErrorf("create", "invalid --card-image %q: %v", string(c.Image), err)
		}
	}
	spec.Card = &c
	return nil
}

// isControl reports the characters the CRD refuses in a card's text.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// manifest is what --dry-run=client prints: no status, no server fields.
type manifest struct {
	APIVersion string               `json:"apiVersion"`
	Kind       string               `json:"kind"`
	Metadata   manifestMetadata     `json:"metadata"`
	Spec       linkv1.ShortLinkSpec `json:"spec"`
}

type manifestMetadata struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

func printManifest(w io.Writer, link *linkv1.ShortLink, format string) error {
	m := manifest{
		APIVersion: link.APIVersion, Kind: link.Kind,
		Metadata: manifestMetadata{Name: link.Name, Namespace: link.Namespace},
		Spec:     link.Spec,
	}
	switch format {
	case "", "yaml":
		out, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	case "json":
		out, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", out)
		return err
	}
	return usageErrorf("create", "invalid -o %q: use yaml or json", format)
}

// apply creates link, or leaves an existing one with the same spec alone, or
// replaces the spec of one that differs when overwrite is set; with dryRun
// the API server checks the write and keeps nothing. It reports what it did
// as kubectl apply does, on stderr: stdout is the short URL's.
func apply(ctx context.Context, cl client.Client, link *linkv1.ShortLink, overwrite, dryRun bool, stderr io.Writer) error {
	where := inNamespace(link.Namespace)
	createOpts := []client.CreateOption{client.FieldOwner(FieldManager)}
	updateOpts := []client.UpdateOption{client.FieldOwner(FieldManager)}
	done := ""
	if dryRun {
		createOpts, updateOpts, done = append(createOpts, client.DryRunAll), append(updateOpts, client.DryRunAll), " (server dry run)"
	}
	var existing linkv1.ShortLink
	err := cl.Get(ctx, client.ObjectKeyFromObject(link), &existing)
	switch {
	case apierrors.IsNotFound(err) && !isResourceNotFound(err):
		warnTakenCode(ctx, cl, link, stderr)
		if err := cl.Create(ctx, link, createOpts...); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return notReadyErrorf("shortlink %s/%s was created by someone else meanwhile: run the command again to compare it", link.Namespace, link.Name)
			}
			return writeError(err, "create", where)
		}
		_, _ = fmt.Fprintf(stderr, "shortlink.linkforge.io/%s created%s\n", link.Name, done)
		return nil
	case err != nil:
		return clusterError(err, "get", where)
	}

	diff := specDiff(&existing.Spec, &link.Spec)
	if len(diff) == 0 {
		link.ObjectMeta = existing.ObjectMeta
		_, _ = fmt.Fprintf(stderr, "shortlink.linkforge.io/%s unchanged\n", link.Name)
		return nil
	}
	if !overwrite {
		return notReadyErrorf("shortlink %s/%s already exists with another spec:\n  %s\n"+
			"Pick another NAME, or run again with --overwrite to replace its spec", link.Namespace, link.Name, strings.Join(diff, "\n  "))
	}
	existing.Spec = link.Spec
	warnTakenCode(ctx, cl, &existing, stderr)
	if err := cl.Update(ctx, &existing, updateOpts...); err != nil {
		if apierrors.IsConflict(err) {
			return notReadyErrorf("shortlink %s/%s changed while it was being overwritten: run the command again", link.Namespace, link.Name)
		}
		return writeError(err, "update", where)
	}
	link.ObjectMeta = existing.ObjectMeta
	_, _ = fmt.Fprintf(stderr, "shortlink.linkforge.io/%s configured%s\n", link.Name, done)
	return nil
}

// warnTakenCode warns, before link is written, when the code its spec asks
// for is held or claimed by a link that takes precedence: a new link would
// serve nothing (Conflict), an existing one keeps serving the code it holds
// (Kept). It reads only the links with that code (field selectors
// spec.code and status.code), and decides as the controller does
// (claim.Decide), with the manager's default --dedup. It says nothing when
// it cannot tell (no permission to list, a CRD without the selectable
// fields): the controller's status says it after the write.
func warnTakenCode(ctx context.Context, cl client.Client, link *linkv1.ShortLink, stderr io.Writer) {
	code := link.Spec.Code
	if code == "" || link.Status.Code == code {
		return
	}
	// The links that hold or claim the code, and the code the link holds
	// (which it keeps while no other link wants it).
	seen := map[string]*linkv1.ShortLink{}
	for _, c := range slices.Compact([]string{code, link.Status.Code}) {
		for _, field := range []string{"spec.code", "status.code"} {
			if c == "" {
				continue
			}
			var list linkv1.ShortLinkList
			if err := cl.List(ctx, &list, client.InNamespace(link.Namespace), client.MatchingFields{field: c}); err != nil {
				return
			}
			for i := range list.Items {
				if o := &list.Items[i]; o.Name != link.Name {
					seen[o.Name] = o
				}
			}
		}
	}
	if len(seen) == 0 {
		return
	}
	canonical, err := shortcode.Canonicalize(link.Spec.URL)
	if err != nil {
		return
	}
	self := claimView(link, canonical)
	if link.CreationTimestamp.IsZero() {
		self.Created = time.Now() // a new link is the youngest
	}
	rivals := make([]claim.Link, 0, len(seen))
	for _, o := range seen {
		rivals = append(rivals, claimView(o, o.Status.CanonicalURL))
	}
	d := claim.Decide(self, []string{code}, rivals)
	rival := seen[d.Rival]
	if rival == nil {
		return
	}
	held := "claimed (its spec.code; it waits for it too)"
	if rival.Status.Code == code {
		held = "held"
	}
	switch {
	case d.Outcome == claim.Conflict && link.Status.Code == "":
		_, _ = fmt.Fprintf(stderr, "warning: code %q is %s by ShortLink %q (%s), which takes precedence (older, or same age and smaller name): "+
			"this link will serve nothing until that code is free. Pick another --code, or leave --code out for a code computed from the URL\n",
			code, held, rival.Name, rival.Spec.URL)
	case d.Outcome == claim.Conflict || d.Outcome == claim.Kept && !d.Moving:
		keeps := fmt.Sprintf("it keeps serving its code %s until then", link.Status.Code)
		if d.Outcome == claim.Conflict {
			keeps = fmt.Sprintf("it cannot keep its code %s either (another link holds or claims it), and will serve nothing", link.Status.Code)
		}
		_, _ = fmt.Fprintf(stderr, "warning: code %q is %s by ShortLink %q (%s), which takes precedence (older, or same age and smaller name): "+
			"shortlink %s will not move to it while it is; %s. Pick another --code to move it now\n",
			code, held, rival.Name, rival.Spec.URL, link.Name, keeps)
	case d.Outcome == claim.Pending || d.Outcome == claim.Kept:
		_, _ = fmt.Fprintf(stderr, "note: code %q is held by younger ShortLink %q (%s): this link takes it by precedence, and %s loses it\n",
			code, rival.Name, rival.Spec.URL, rival.Name)
	}
}

// claimView is a link as the ownership rule reads it, with the manager's
// default --dedup (on) for a link without a dedupPolicy.
func claimView(l *linkv1.ShortLink, canonical string) claim.Link {
	return claim.Link{
		Name: l.Name, Created: l.CreationTimestamp.Time, Target: rules.Identity(l, canonical),
		Custom: l.Spec.Code, Held: l.Status.Code, Confirmed: l.HoldsConfirmedCode(), Exclusive: !l.Dedup(true),
	}
}

// policyDenied is how the API server words a ValidatingAdmissionPolicy's
// refusal (the destination policy's, say): the policy's name and its message.
var policyDenied = regexp.MustCompile(`^ValidatingAdmissionPolicy '([^']*)'(?: with binding '[^']*')? denied request: (.*)$`)

// writeError explains a failed create or update: the API server's refusal
// of the spec (its CEL rules, an admission policy) is the user's to fix, so
// it is exit status 1.
func writeError(err error, verb, where string) error {
	if !apierrors.IsInvalid(err) {
		return clusterError(err, verb, where)
	}
	var status apierrors.APIStatus
	msg := err.Error()
	if errors.As(err, &status) && status.Status().Details != nil && len(status.Status().Details.Causes) > 0 {
		var causes []string
		for _, c := range status.Status().Details.Causes {
			if m := policyDenied.FindStringSubmatch(c.Message); m != nil {
				return notReadyErrorf("the admission policy %s refused the ShortLink: %s", m[1], m[2])
			}
			if c.Field == "" {
				causes = append(causes, c.Message)
				continue
			}
			causes = append(causes, fmt.Sprintf("%s: %s", c.Field, c.Message))
		}
		msg = strings.Join(causes, "\n  ")
	}
	return notReadyErrorf("the API server refused the ShortLink:\n  %s", msg)
}

// specDiff lists the fields in which have and want differ, as
// "field: have → want", with the CRD's defaults applied.
func specDiff(have, want *linkv1.ShortLinkSpec) []string {
	h, w := specFields(have), specFields(want)
	var diff []string
	for i := range h {
		if h[i][1] != w[i][1] {
			diff = append(diff, fmt.Sprintf("%s: %s (wanted %s)", h[i][0], h[i][1], w[i][1]))
		}
	}
	return diff
}

func specFields(s *linkv1.ShortLinkSpec) [][2]string {
	unset := "<unset>"
	str := func(v string) string {
		if v == "" {
			return unset
		}
		return strconv.Quote(v)
	}
	expiresAt, activatesAt, ttl, maxUses, ttlAfter := unset, unset, unset, unset, unset
	if s.ExpiresAt != nil {
		expiresAt = s.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if s.ActivatesAt != nil {
		activatesAt = s.ActivatesAt.UTC().Format(time.RFC3339)
	}
	if s.TTL != nil {
		ttl = s.TTL.Duration.String()
	}
	if s.MaxUses != nil {
		maxUses = strconv.FormatInt(*s.MaxUses, 10)
	}
	if s.TTLSecondsAfterFinished != nil {
		ttlAfter = strconv.Itoa(int(*s.TTLSecondsAfterFinished))
	}
	status := s.RedirectStatus
	if status == 0 {
		status = linkv1.DefaultRedirectStatus
	}
	return append([][2]string{
		{"url", str(s.URL)},
		{"code", str(s.Code)},
		{"expiresAt", expiresAt},
		{"ttl", ttl},
		{"maxUses", maxUses},
		{"redirectStatus", strconv.Itoa(int(status))},
		{"forwardQuery", strconv.FormatBool(s.ForwardQuery)},
		{"activatesAt", activatesAt},
		{"dedupPolicy", str(string(s.DedupPolicy))},
		{"reapPolicy", str(string(s.ReapPolicy))},
		{"ttlSecondsAfterFinished", ttlAfter},
	}, routingFields(s, unset)...)
}

// waitReady polls the link until the controller has reconciled its current
// spec: it returns the link when it is Ready, an error when it is not (a
// conflict, an invalid URL, expired, exhausted) or when timeout passes.
func waitReady(ctx context.Context, cl client.Client, link *linkv1.ShortLink, timeout time.Duration) (*linkv1.ShortLink, error) {
	key := types.NamespacedName{Namespace: link.Namespace, Name: link.Name}
	ref := fmt.Sprintf("shortlink %s/%s", link.Namespace, link.Name)
	// The reads themselves get no deadline: one cut short by the timeout
	// would read as a cluster error rather than as not Ready in time.
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var last linkv1.ShortLink
	for {
		var cur linkv1.ShortLink
		err := cl.Get(ctx, key, &cur)
		switch {
		case err == nil:
			last = cur
			if done, err := readiness(&cur, ref); done {
				return &cur, err
			}
		case apierrors.IsNotFound(err) && !isResourceNotFound(err):
			return nil, notReadyErrorf("%s was deleted while waiting for it to be Ready", ref)
		default:
			return nil, clusterError(err, "get", inNamespace(link.Namespace))
		}
		select {
		case <-deadline.C:
			return nil, timeoutError(&last, ref, timeout)
		case <-ticker.C:
		}
	}
}

// readiness tells whether the controller is done with link's current spec,
// and if so, the error that says why the link is not Ready.
func readiness(link *linkv1.ShortLink, ref string) (done bool, err error) {
	ready := meta.FindStatusCondition(link.Status.Conditions, linkv1.ConditionReady)
	if link.Generation == 0 || link.Status.ObservedGeneration != link.Generation ||
		ready == nil || ready.ObservedGeneration != link.Generation {
		return false, nil
	}
	if ready.Status == metav1.ConditionTrue {
		return true, nil
	}
	switch {
	case link.Status.State == linkv1.StatePending || link.Status.State == "":
		return false, nil // a younger holder is moving off the code
	case link.Status.State == linkv1.StateKept && meta.IsStatusConditionTrue(link.Status.Conditions, linkv1.ConditionReconciling):
		return false, nil // the same, while the link keeps serving its earlier code
	}
	return true, notReadyErrorf("%s is %s: %s", ref, link.Status.State, ready.Message)
}

func timeoutError(last *linkv1.ShortLink, ref string, timeout time.Duration) error {
	ready := meta.FindStatusCondition(last.Status.Conditions, linkv1.ConditionReady)
	if last.Generation == 0 || ready == nil || last.Status.ObservedGeneration < 1 {
		return notReadyErrorf("%s is not Ready after %s: no controller has reconciled it. "+
			"Is the linkforge manager running? (kubectl get deployments -A -l app.kubernetes.io/name=linkforge). "+
			"The link is created; wait longer with: kubectl wait --for=condition=Ready -n %s shortlink/%s", ref, timeout, last.Namespace, last.Name)
	}
	if last.Status.ObservedGeneration != last.Generation {
		return notReadyErrorf("%s is not Ready after %s: the controller has not caught up with its current spec (generation %d, observed %d); is the linkforge manager running?",
			ref, timeout, last.Generation, last.Status.ObservedGeneration)
	}
	state := last.Status.State
	if state == "" {
		state = "not Ready"
	}
	return notReadyErrorf("%s is not Ready after %s: it is %s: %s", ref, timeout, state, ready.Message)
}
