package importer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// APIVersion and Kind of the manifests written.
const (
	APIVersion = "linkforge.io/v1alpha1"
	Kind       = "ShortLink"
)

// Manifest is a ShortLink as written by the importer: only the fields an
// import sets. It mirrors api/v1alpha1.ShortLink (a test decodes every
// manifest into that type strictly) without importing it, so that the CLI
// does not link the controller-runtime scheme machinery, and so that no
// empty status or creationTimestamp ends up in the files.
type Manifest struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   ManifestMeta `json:"metadata"`
	Spec       ManifestSpec `json:"spec"`
}

// ManifestMeta is the manifest's metadata.
type ManifestMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ManifestSpec is the part of ShortLinkSpec an import fills.
type ManifestSpec struct {
	URL          string `json:"url"`
	Code         string `json:"code,omitempty"`
	ExpiresAt    string `json:"expiresAt,omitempty"`   // RFC 3339, UTC
	ActivatesAt  string `json:"activatesAt,omitempty"` // RFC 3339, UTC
	MaxUses      *int64 `json:"maxUses,omitempty"`
	ForwardQuery bool   `json:"forwardQuery,omitempty"`
}

// YAML is the manifest as one YAML document (without a "---" line).
func (m Manifest) YAML() ([]byte, error) {
	return yaml.Marshal(m)
}

// sourcePattern is what --source takes: a name people can read and a
// shell need not quote, such as yourls-prod or links.csv@sha256:0123abcd.
var sourcePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@:/+=-]{0,252}$`)

// ValidateSource checks a source named with --source.
func ValidateSource(source string) error {
	if !sourcePattern.MatchString(source) {
		return fmt.Errorf("invalid source %q: 1-253 of A-Z a-z 0-9 . _ @ : / + = - starting with a letter or digit, e.g. yourls-prod", source)
	}
	return nil
}

// DefaultSource is the source of an import of file whose bytes hash to
// sum (SHA-256): its base name (bytes a source does not take as '_') and
// the first 16 hex digits of the hash, links.csv@sha256:0123456789abcdef.
// The same file imported again is the same source; another file, or the
// same name with other content, is another.
func DefaultSource(file string, sum []byte) string {
	base := []byte(filepath.Base(file))
	for i, c := range base {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' {
			base[i] = '_'
		}
	}
	if len(base) > 200 {
		base = base[:200]
	}
	return string(base) + "@sha256:" + hex.EncodeToString(sum[:min(len(sum), 8)])
}

// WithSource returns manifests with the source annotation set to source.
// The manifests' annotation maps are copied: links share theirs with them.
func WithSource(manifests []Manifest, source string) []Manifest {
	out := make([]Manifest, len(manifests))
	for i, m := range manifests {
		annotations := make(map[string]string, len(m.Metadata.Annotations)+1)
		for k, v := range m.Metadata.Annotations {
			annotations[k] = v
		}
		annotations[SourceAnnotation] = source
		m.Metadata.Annotations = annotations
		out[i] = m
	}
	return out
}

// ValidateNamePrefix checks that prefix can start a ShortLink name.
func ValidateNamePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	// Any valid name continues with a lower-case letter or digit.
	if errs := validation.IsDNS1123Subdomain(prefix + "a"); len(errs) > 0 {
		return fmt.Errorf("invalid name prefix %q: %s (e.g. yourls-)", prefix, strings.Join(errs, "; "))
	}
	return nil
}

// Manifests turns links into ShortLink manifests in namespace ("" leaves the
// namespace to kubectl), or in the link's own namespace when --domain gave
// it one, with names prefix + a name derived from the code (or from the URL
// when there is none), unique within their namespace.
//
// A name depends only on its own link, so importing a file again with more
// rows renames nothing; only a clash within the output (two links to the
// same URL without a code) adds a counter, in input order.
func Manifests(links []Link, namespace, prefix string) ([]Manifest, error) {
	if namespace != "" {
		if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
			return nil, fmt.Errorf("invalid namespace %q: %s", namespace, strings.Join(errs, "; "))
		}
	}
	if err := ValidateNamePrefix(prefix); err != nil {
		return nil, err
	}
	taken := map[string]bool{}
	manifests := make([]Manifest, 0, len(links))
	for _, link := range links {
		ns := namespace
		if link.Namespace != "" {
			ns = link.Namespace
		}
		base := prefix + nameFor(link)
		name := base
		for n := 2; taken[ns+"/"+name]; n++ {
			name = base + "-" + strconv.Itoa(n)
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, fmt.Errorf("%s: the name %q is not a valid object name: %s; use a shorter --name-prefix", link.Position, name, strings.Join(errs, "; "))
		}
		taken[ns+"/"+name] = true
		m := Manifest{
			APIVersion: APIVersion,
			Kind:       Kind,
			Metadata:   ManifestMeta{Name: name, Namespace: ns, Labels: link.Labels, Annotations: link.Annotations},
			Spec: ManifestSpec{
				URL:          link.URL,
				Code:         link.Code,
				MaxUses:      link.MaxUses,
				ForwardQuery: link.ForwardQuery,
			},
		}
		if link.ExpiresAt != nil {
			m.Spec.ExpiresAt = formatExpiry(*link.ExpiresAt)
		}
		if link.ActivatesAt != nil {
			// Rounded up as an expiry is: the link never starts before its time.
			m.Spec.ActivatesAt = formatExpiry(*link.ActivatesAt)
		}
		manifests = append(manifests, m)
	}
	return manifests, nil
}

// formatExpiry writes t in UTC to the second, as metav1.Time does; a
// fraction is rounded up so that the link never expires earlier than asked.
func formatExpiry(t time.Time) string {
	if t.Nanosecond() != 0 {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	return t.UTC().Format(time.RFC3339)
}

// nameFor derives a DNS-1123 name from the link's code: lower-cased, '_' as
// '-'. Codes are case-sensitive, so when that changes the code ("Promo",
// "promo_1") a hash of the exact code is appended: "Promo" and "promo" get
// different names. A link without a code is named after its canonical URL's
// hash, as the controller will compute its code from that URL.
func nameFor(link Link) string {
	if link.Code == "" {
		return "link-" + shortHash(link.CanonicalURL)
	}
	name := strings.Trim(strings.ReplaceAll(strings.ToLower(link.Code), "_", "-"), "-")
	if name == link.Code {
		return name
	}
	if name == "" {
		name = "code"
	}
	return name + "-" + shortHash(link.Code)
}

// shortHash is 8 hex digits of SHA-256: enough to tell apart the few codes
// that differ only in case or '_', short enough to keep names readable.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}
