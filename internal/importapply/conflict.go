package importapply

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/linkforge/linkforge/internal/importer"
)

// An import changes a ShortLink only when it created it: the link carries
// the import's source (importer.SourceAnnotation) with the same value. Any
// other link of the manifest's name (made by hand, by another file, by an
// import before sources were recorded) is a Conflict: reported with what
// applying would change, and left as it is unless Options.Overwrite.

// live is what the cluster holds of a link, as far as an import cares.
type live struct {
	name        string
	spec        map[string]any
	labels      map[string]string
	annotations map[string]string
	statusCode  string // the code it is served under
	// owned are the fields of spec, labels and annotations (paths of
	// fieldPath) the import's manager applied; others the fields of the
	// other managers, who they are in managers.
	owned, others map[string]bool
	managers      []string
}

// A field path names a field an import sets: "spec/url", "labels/<key>",
// "annotations/<key>" (label and annotation keys hold dots and slashes).
const (
	kindSpec        = "spec"
	kindLabels      = "labels"
	kindAnnotations = "annotations"
)

func specPath(name string) string      { return kindSpec + "/" + name }
func labelPath(key string) string      { return kindLabels + "/" + key }
func annotationPath(key string) string { return kindAnnotations + "/" + key }

func splitPath(path string) (kind, name string) {
	kind, name, _ = strings.Cut(path, "/")
	return kind, name
}

// liveFrom reads u, a ShortLink.
func liveFrom(u *unstructured.Unstructured) *live {
	l := &live{
		name:        u.GetName(),
		labels:      u.GetLabels(),
		annotations: u.GetAnnotations(),
		owned:       map[string]bool{},
		others:      map[string]bool{},
	}
	l.spec, _, _ = unstructured.NestedMap(u.Object, "spec")
	l.statusCode, _, _ = unstructured.NestedString(u.Object, "status", "code")
	seen := map[string]bool{}
	for _, entry := range u.GetManagedFields() {
		paths := fieldPaths(entry.FieldsV1)
		ours := entry.Manager == FieldManager && entry.Operation == metav1.ManagedFieldsOperationApply
		for _, path := range paths {
			if ours {
				l.owned[path] = true
			} else {
				l.others[path] = true
			}
		}
		if !ours && len(paths) > 0 && !seen[entry.Manager] {
			seen[entry.Manager] = true
			l.managers = append(l.managers, entry.Manager)
		}
	}
	return l
}

// fieldPaths lists the fields of spec, labels and annotations a managed
// fields entry holds.
func fieldPaths(fields *metav1.FieldsV1) []string {
	if fields == nil {
		return nil
	}
	var set map[string]json.RawMessage
	if json.Unmarshal(fields.GetRawBytes(), &set) != nil {
		return nil
	}
	children := func(raw json.RawMessage) []string {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(raw, &m)
		var names []string
		for k := range m {
			if name, ok := strings.CutPrefix(k, "f:"); ok {
				names = append(names, name)
			}
		}
		return names
	}
	var paths []string
	for _, name := range children(set["f:spec"]) {
		paths = append(paths, specPath(name))
	}
	var metadata map[string]json.RawMessage
	_ = json.Unmarshal(set["f:metadata"], &metadata)
	for _, key := range children(metadata["f:labels"]) {
		paths = append(paths, labelPath(key))
	}
	for _, key := range children(metadata["f:annotations"]) {
		paths = append(paths, annotationPath(key))
	}
	return paths
}

// value is the live value at path, as desired writes it.
func (l *live) value(path string) (string, bool) {
	kind, name := splitPath(path)
	switch kind {
	case kindSpec:
		v, ok := l.spec[name]
		if !ok || v == nil {
			return "", false
		}
		return scalar(v), true
	case kindLabels:
		v, ok := l.labels[name]
		return v, ok
	case kindAnnotations:
		v, ok := l.annotations[name]
		return v, ok
	}
	return "", false
}

func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	data, _ := json.Marshal(v)
	return string(data)
}

// desired is every field m sets, by path.
func desired(m importer.Manifest) map[string]string {
	fields := map[string]string{specPath("url"): m.Spec.URL}
	set := func(name, value string) {
		if value != "" {
			fields[specPath(name)] = value
		}
	}
	set("code", m.Spec.Code)
	set("expiresAt", m.Spec.ExpiresAt)
	set("activatesAt", m.Spec.ActivatesAt)
	if m.Spec.MaxUses != nil {
		set("maxUses", strconv.FormatInt(*m.Spec.MaxUses, 10))
	}
	if m.Spec.ForwardQuery {
		set("forwardQuery", "true")
	}
	for k, v := range m.Metadata.Labels {
		fields[labelPath(k)] = v
	}
	for k, v := range m.Metadata.Annotations {
		fields[annotationPath(k)] = v
	}
	return fields
}

// Change is one field applying a manifest changes.
type Change struct {
	Field    string // url, code, title, maxUses, label tag.linkforge.io/x...
	From, To string
	// Unset and Removed: the field is not there before, or not after.
	Unset, Removed bool
	// Computed is the code the link is served under when it has no
	// spec.code: changing the code changes its short URL.
	Computed string
}

func (c Change) String() string {
	from, to := strconv.Quote(c.From), strconv.Quote(c.To)
	switch {
	case c.Unset && c.Computed != "":
		from = fmt.Sprintf("(computed %q)", c.Computed)
	case c.Unset:
		from = "(unset)"
	}
	if c.Removed {
		to = "(removed)"
	}
	s := c.Field + " " + from + " -> " + to
	if c.Field == "code" {
		s += " (its short URL changes)"
	}
	return s
}

// fieldOrder sorts changes as people read a link: target first.
var fieldOrder = map[string]int{"url": 0, "code": 1, "expiresAt": 2, "activatesAt": 3, "maxUses": 4, "forwardQuery": 5}

// fieldName is how a message names the field at path.
func fieldName(path string) string {
	kind, name := splitPath(path)
	switch {
	case kind == kindSpec:
		return name
	case kind == kindAnnotations && name == importer.TitleAnnotation:
		return "title"
	case kind == kindAnnotations && name == importer.VisitsAnnotation:
		return "imported-visits"
	case kind == kindAnnotations && name == importer.SourceAnnotation:
		return "source"
	case kind == kindLabels:
		return "label " + name
	}
	return "annotation " + name
}

// changes lists what applying m to l changes, the source annotation left
// out: fields m sets to other values, and fields the import's manager
// applied before that m no longer sets and no other manager holds (the
// API server removes those).
func changes(m importer.Manifest, l *live) []Change {
	want := desired(m)
	var out []Change
	for path, to := range want {
		if path == annotationPath(importer.SourceAnnotation) {
			continue
		}
		from, ok := l.value(path)
		if ok && from == to {
			continue
		}
		c := Change{Field: fieldName(path), From: from, To: to, Unset: !ok}
		if path == specPath("code") && !ok {
			c.Computed = l.statusCode
		}
		out = append(out, c)
	}
	for path := range l.owned {
		if _, kept := want[path]; kept || l.others[path] || path == annotationPath(importer.SourceAnnotation) {
			continue
		}
		if from, ok := l.value(path); ok {
			out = append(out, Change{Field: fieldName(path), From: from, Removed: true})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		oi, iSpec := fieldOrder[out[i].Field]
		oj, jSpec := fieldOrder[out[j].Field]
		switch {
		case iSpec && jSpec:
			return oi < oj
		case iSpec != jSpec:
			return iSpec
		}
		return out[i].Field < out[j].Field
	})
	return out
}

// Conflict is a manifest whose link exists and was not created by this
// import, or whose code another link holds.
type Conflict struct {
	Index    int // into the manifests
	Manifest importer.Manifest
	// Owner says whose the link is: "imported from links-a.csv@sha256:…",
	// "made by kubectl-client-side-apply".
	Owner string
	// Changes is what applying the manifest changes (or changed, when
	// Overwritten).
	Changes []Change
	// HeldBy names the link that holds the manifest's code in its
	// namespace; the manifest is not applied, even with Overwrite.
	HeldBy string
	// Overwritten: Options.Overwrite applied it.
	Overwritten bool
}

func (c Conflict) String() string {
	ref := c.Manifest.Metadata.Namespace + "/" + c.Manifest.Metadata.Name
	if c.HeldBy != "" {
		return fmt.Sprintf("ShortLink %s: code %q is held by ShortLink %s in the namespace: a link of that code would not get it (CodeConflict); not applied", ref, c.Manifest.Spec.Code, c.HeldBy)
	}
	parts := make([]string, len(c.Changes))
	for i, change := range c.Changes {
		parts[i] = change.String()
	}
	if c.Overwritten {
		return fmt.Sprintf("ShortLink %s was not created by this import (%s); --overwrite changed %s", ref, c.Owner, strings.Join(parts, ", "))
	}
	return fmt.Sprintf("ShortLink %s exists and was not created by this import (%s): left as it is; --overwrite would change %s", ref, c.Owner, strings.Join(parts, ", "))
}

// owner says whose l is, for a Conflict.
func owner(l *live) string {
	if source, ok := l.annotations[importer.SourceAnnotation]; ok {
		return "imported from " + strconv.Quote(source)
	}
	if len(l.owned) > 0 {
		return "imported by a linkforge import that did not record its source"
	}
	if len(l.managers) > 0 {
		return "made by " + strings.Join(l.managers, ", ")
	}
	return "made by someone else"
}

// verdict is what to do with one manifest.
type verdict int

const (
	toCreate    verdict = iota
	toUpdate            // the import's own link, changed
	toLeave             // the import's own link, unchanged: no request
	toMatch             // another's link that already holds what the manifest says: left as it is
	toConflict          // another's link that the manifest would change, or a code another holds
	toOverwrite         // a conflict applied: Options.Overwrite
)

// found is what the import needs to know of the link of a manifest's
// name, decided as soon as the link is read, so that the import holds a
// few words per link rather than the link.
type found struct {
	ours    bool     // it carries the manifest's source
	changes []Change // what applying the manifest would change
	owner   string   // whose it is, when not ours
	code    string   // its spec.code
}

// assess reads l, the link of m's name, for judge.
func assess(m importer.Manifest, l *live) *found {
	f := &found{changes: changes(m, l)}
	f.code, _ = l.value(specPath("code"))
	source := m.Metadata.Annotations[importer.SourceAnnotation]
	f.ours = source != "" && l.annotations[importer.SourceAnnotation] == source
	if !f.ours {
		f.owner = owner(l)
	}
	return f
}

// judge decides what to do with m, whose link is f (nil: there is none);
// holder is the other link of the namespace that holds m's code, if any.
func judge(m importer.Manifest, f *found, holder string, overwrite bool) (verdict, *Conflict) {
	if m.Spec.Code != "" && holder != "" && (f == nil || f.code != m.Spec.Code) {
		return toConflict, &Conflict{Manifest: m, HeldBy: holder}
	}
	switch {
	case f == nil:
		return toCreate, nil
	case f.ours && len(f.changes) == 0:
		return toLeave, nil
	case f.ours:
		return toUpdate, nil
	case len(f.changes) == 0:
		return toMatch, nil
	}
	c := &Conflict{Manifest: m, Owner: f.owner, Changes: f.changes}
	if overwrite {
		c.Overwritten = true
		return toOverwrite, c
	}
	return toConflict, c
}
