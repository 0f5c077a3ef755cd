package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file holds the parts of a ShortLink that choose where a click goes
// besides spec.url: redirect rules, weighted variants, the expired URL and
// path forwarding (internal/rules evaluates them).

// Bounds of the routing fields: they bound the work of a click and of the
// CRD's validation.
const (
	MaxRules    = 16
	MaxVariants = 10
)

// TargetURL is a destination of a link other than spec.url (a rule's,
// a variant's, spec.expiredURL): an absolute http or https URL of at most
// 2048 bytes, validated at apply as spec.url is (these rules repeat
// spec.url's; controllers/crd_validation_test.go holds them equal) and
// canonicalized and judged by the destination policy in the controller as
// spec.url is.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=2048
// +kubebuilder:validation:XValidation:rule="self.trim().lowerAscii().startsWith('http://') || self.trim().lowerAscii().startsWith('https://')",message="url must be an absolute URL starting with http:// or https://"
// +kubebuilder:validation:XValidation:rule=`!self.trim().matches('[\x00-\x1f\x7f]')`,message="url must not contain control characters (bytes 0x00-0x1F or 0x7F), such as CR or LF"
// +kubebuilder:validation:XValidation:rule=`!self.trim().matches('^[A-Za-z]+://[^/?#]*@')`,message="url must not hold a user name or password before '@': it can disguise the real host"
// +kubebuilder:validation:XValidation:rule=`!self.trim().matches('^[A-Za-z]+://(:[0-9]*)?([/?#]|$)')`,message="url must have a host, e.g. https://example.com/"
// +kubebuilder:validation:XValidation:rule=`!self.trim().matches('^[A-Za-z]+://[^/?#]*:[^]/?#:]+([/?#]|$)') || self.trim().matches('^[A-Za-z]+://[^/?#]*:0*([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])([/?#]|$)')`,message="url port must be a number from 1 to 65535"
type TargetURL string

// DeviceClass is the kind of client a User-Agent names.
// +kubebuilder:validation:Enum=ios;android;desktop;bot
type DeviceClass string

const (
	// DeviceIOS: an iPhone, iPad (before iPadOS 13, which sends a macOS
	// User-Agent by default) or iPod.
	DeviceIOS DeviceClass = "ios"
	// DeviceAndroid: an Android phone or tablet, its browsers and WebViews.
	DeviceAndroid DeviceClass = "android"
	// DeviceDesktop: a browser on Windows, macOS, Linux or ChromeOS.
	DeviceDesktop DeviceClass = "desktop"
	// DeviceBot: a crawler, link-preview fetcher or HTTP library (Googlebot,
	// Slackbot, facebookexternalhit, curl...).
	DeviceBot DeviceClass = "bot"
)

// RedirectRule sends the clicks that meet all of its conditions to its url.
// Rules are tried in order; the first that matches wins. Every condition
// reads what the client sends (see docs/api.md, "Rules"): use them to route
// people, never to protect a destination.
// +kubebuilder:validation:XValidation:rule="has(self.devices) || has(self.languages) || has(self.queryParams) || has(self.headers) || has(self.after) || has(self.before) || has(self.countries)",message="a rule needs at least one condition: devices, languages, queryParams, headers, after, before or countries"
// +kubebuilder:validation:XValidation:rule="!(has(self.after) && has(self.before)) || self.after < self.before",message="a rule's after must be before its before: the window would be empty"
type RedirectRule struct {
	// url is where the clicks that match the rule go.
	// +required
	URL TargetURL `json:"url"`

	// devices matches when the client's device class, read from its
	// User-Agent, is one of these: ios, android, desktop, bot. A User-Agent
	// of no known kind (or none) matches none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	Devices []DeviceClass `json:"devices,omitempty"`

	// languages matches when a language the client accepts falls under one
	// of these language ranges: "de" matches de, de-DE and de-AT; "pt-BR"
	// only pt-BR and its subtags; case-insensitive, and de_DE reads as
	// de-DE. The client accepts the entries of its Accept-Language with
	// the highest q and those with q >= 0.9 (an entry with an invalid q is
	// ignored, as RFC 9110 reads it; see docs/api.md, "Rules").
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=35
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*$`
	Languages []string `json:"languages,omitempty"`

	// queryParams match query parameters of the short URL: each must be
	// present (no value given) or, with a value, present with exactly that
	// value once percent-decoded. All must hold.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	QueryParams []QueryParamMatch `json:"queryParams,omitempty"`

	// headers match request headers: each header must be present with
	// exactly this value (the name compares without case, the value as
	// written). All must hold.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Headers []HeaderMatch `json:"headers,omitempty"`

	// after matches from this instant (RFC 3339) on, by the redirector's clock.
	// +optional
	After *metav1.Time `json:"after,omitempty"`

	// before matches until this instant (RFC 3339), excluded.
	// +optional
	Before *metav1.Time `json:"before,omitempty"`

	// countries matches when the client's country, as ISO 3166-1 alpha-2
	// code, is one of these. The redirector reads the country from a request
	// header that its operator names (--country-header), as set by the
	// ingress or CDN in front of it; without that flag no country is known
	// and this condition never holds.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^[A-Z]{2}$`
	Countries []string `json:"countries,omitempty"`
}

// QueryParamMatch is a condition on one query parameter.
type QueryParamMatch struct {
	// name is the parameter's name, compared exactly once percent-decoded.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`

	// value, when set, is the value the parameter must have (percent-decoded,
	// compared exactly; "" matches "?name=" and "?name"). Unset: the parameter
	// must be present, with any value.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Value *string `json:"value,omitempty"`
}

// HeaderMatch is a condition on one request header.
type HeaderMatch struct {
	// name is the header's name (an HTTP token), compared without case.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Name string `json:"name"`

	// value is the value the header must have, compared exactly.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`
}

// Variant is a weighted destination of the clicks that no rule matches.
type Variant struct {
	// url is where the variant's share of the clicks goes.
	// +required
	URL TargetURL `json:"url"`

	// weight is the variant's share of the clicks that no rule matches, in
	// percent (1-100). spec.url takes what the variants leave of 100.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`
}

// VariantsEnd ends a link's A/B test: from at on, the clicks that no rule
// matches all go to url, outside the split.
type VariantsEnd struct {
	// at is the instant (RFC 3339) the split ends, by the redirectors'
	// clocks (as a rule's after).
	// +required
	At metav1.Time `json:"at"`

	// url is where the clicks go from then on: spec.url or the url of one
	// of spec.variants, as written there (the winner of the test). They
	// are no longer split, so they no longer count in status.variantUses.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`
}

// SplitBuckets are the buckets of the split one variant holds. A client's
// bucket (0-99) is a hash of the link, its address and its agent's family;
// each variant holds weight buckets, spec.url every bucket no variant holds.
type SplitBuckets struct {
	// url is the variant's url as written in spec.variants.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`

	// buckets are the buckets the variant holds, as ascending ranges and
	// numbers separated by commas: "0-19,45,50-58".
	// +required
	// +kubebuilder:validation:MaxLength=400
	// +kubebuilder:validation:Pattern=`^[0-9]{1,2}(-[0-9]{1,2})?(,[0-9]{1,2}(-[0-9]{1,2})?)*$`
	Buckets string `json:"buckets"`
}

// VariantUses counts the redirects one destination of a link's split served.
type VariantUses struct {
	// url is spec.url or a variant's url, as written in the spec.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`

	// uses is how many redirects went to url, summed over the redirectors.
	// +required
	// +kubebuilder:validation:Minimum=0
	Uses int64 `json:"uses"`
}
