package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReapPolicy says what the reaper does with a link once it has finished
// (expired or exhausted).
// +kubebuilder:validation:Enum=Delete;Retain
type ReapPolicy string

const (
	// ReapPolicyDelete deletes a finished link after ttlSecondsAfterFinished.
	ReapPolicyDelete ReapPolicy = "Delete"
	// ReapPolicyRetain keeps a finished link forever.
	ReapPolicyRetain ReapPolicy = "Retain"
)

// DedupPolicy says whether a link shares its code with the links of its
// namespace that have the same target (the same canonical URL, expiry,
// activation time, idleTimeout, maxUses, redirectStatus, forwardQuery,
// forwardPath, rules, variants, variantsEnd and expiredURL).
// +kubebuilder:validation:Enum=IfSameTarget;Never
type DedupPolicy string

const (
	// DedupIfSameTarget shares one code among the links of a target.
	DedupIfSameTarget DedupPolicy = "IfSameTarget"
	// DedupNever gives the link a code of its own.
	DedupNever DedupPolicy = "Never"
)

// Condition types of a ShortLink. Ready is always present; Reconciling and
// Stalled only while true (kstatus).
const (
	ConditionReady       = "Ready"
	ConditionExpired     = "Expired"
	ConditionExhausted   = "Exhausted"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
)

// Reasons of the Ready condition and its companions.
const (
	ReasonCodeAssigned = "CodeAssigned"
	ReasonExpired      = "Expired"
	ReasonExhausted    = "Exhausted"
	ReasonCodeConflict = "CodeConflict"
	ReasonInvalidURL   = "InvalidURL"
	// ReasonDestinationNotAllowed: the host of spec.url or of another
	// target is not on its namespace's linkforge.io/allowed-hosts list, or a
	// DestinationDenyList denies it.
	ReasonDestinationNotAllowed = "DestinationNotAllowed"
	ReasonProgressing           = "Progressing"
	ReasonActive                = "Active"
	ReasonScheduled             = "Scheduled"
	// ReasonIdleExpired is the reason of the Expired condition of a link
	// that finished because it was not used for spec.idleTimeout (Ready
	// keeps reason Expired).
	ReasonIdleExpired = "IdleExpired"
)

// LinkState is what a link does now, in one word: the controller's reading
// of its typed status, for people (the State column of kubectl get) and for
// scripts that list links.
// +kubebuilder:validation:Enum=Active;Scheduled;Pending;Kept;Expired;Exhausted;Conflict;Invalid;Blocked
type LinkState string

const (
	// StateActive: the link holds a confirmed code and redirects.
	StateActive LinkState = "Active"
	// StateScheduled: the link holds a confirmed code but its activatesAt
	// has not come yet; until then it answers like an unknown code.
	StateScheduled LinkState = "Scheduled"
	// StatePending: the link's code is still held by a younger link that is
	// moving to another code; it does not redirect yet.
	StatePending LinkState = "Pending"
	// StateKept: the link's spec asks for a code it cannot take yet (held or
	// declared by a link with precedence, or still held by a younger link
	// that is moving), and it keeps the code it held before its spec
	// changed (status.code), where the redirectors serve its current spec,
	// until the wanted code is free: an edit of spec.code to a taken code
	// does not take the link's short URL down. The Ready condition names
	// the link that holds the wanted code and the code still served.
	StateKept LinkState = "Kept"
	// StateExpired: the link's expiry has passed, or it was not used for its
	// idleTimeout; it answers 410 Gone, or redirects to spec.expiredURL (or
	// its namespace's gone fallback), as its Ready message says.
	StateExpired LinkState = "Expired"
	// StateExhausted: the link has served all of its maxUses; it answers
	// 410 Gone, or redirects as an expired link does.
	StateExhausted LinkState = "Exhausted"
	// StateConflict: another link takes precedence for every code this link
	// may hold; it holds none.
	StateConflict LinkState = "Conflict"
	// StateInvalid: spec.url, or another target (a rule's, a variant's,
	// spec.expiredURL), is refused by the canonicalizer; the link holds no code.
	StateInvalid LinkState = "Invalid"
	// StateBlocked: the destination policy does not allow the host of
	// spec.url or of another target (the namespace's allowed hosts, or a
	// DestinationDenyList); the link holds no code and does not redirect
	// until the URL or the policy changes.
	StateBlocked LinkState = "Blocked"
)

// DefaultRedirectStatus is the HTTP status of a redirect when spec.redirectStatus is unset.
const DefaultRedirectStatus int32 = 302

// ShortLinkSpec is what a team asks for: a target URL and how to redirect to it.
// +kubebuilder:validation:XValidation:rule="!(has(self.expiresAt) && has(self.ttl))",message="set at most one of expiresAt and ttl: both give the link's expiry"
// +kubebuilder:validation:XValidation:rule="!(has(self.activatesAt) && has(self.expiresAt)) || self.activatesAt < self.expiresAt",message="activatesAt must be before expiresAt: the link would never redirect"
// +kubebuilder:validation:XValidation:rule="!has(self.variants) || self.variants.map(v, v.weight).sum() <= 100",message="the weights of variants add up to more than 100: they are percentages of the clicks, and spec.url takes what they leave of 100"
// +kubebuilder:validation:XValidation:rule="!has(self.variants) || self.variants.all(v, v.url != self.url && self.variants.exists_one(w, w.url == v.url))",message="each variant needs a url of its own, other than spec.url (spec.url takes what the weights leave of 100)"
// +kubebuilder:validation:XValidation:rule="!has(self.variantsEnd) || has(self.variants)",message="variantsEnd ends the split of spec.variants: set variants, or remove variantsEnd"
// +kubebuilder:validation:XValidation:rule="!has(self.variantsEnd) || !has(self.variants) || self.variantsEnd.url == self.url || self.variants.exists(v, v.url == self.variantsEnd.url)",message="variantsEnd.url must be spec.url or the url of one of spec.variants, as written there: the destination that wins the test"
type ShortLinkSpec struct {
	// url is the target of the short link: an absolute http or https URL of at
	// most 2048 bytes. Redirects send it as written (trimmed); the code is
	// computed from its canonical form (see status.canonicalURL).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.trim().lowerAscii().startsWith('http://') || self.trim().lowerAscii().startsWith('https://')",message="url must be an absolute URL starting with http:// or https://"
	// URLs that cannot work are refused when applied: control characters, a
	// user name or password, no host, a port outside 1-65535. The controller
	// checks the rest (status reason InvalidURL).
	// +kubebuilder:validation:XValidation:rule=`!self.trim().matches('[\x00-\x1f\x7f]')`,message="url must not contain control characters (bytes 0x00-0x1F or 0x7F), such as CR or LF"
	// +kubebuilder:validation:XValidation:rule=`!self.trim().matches('^[A-Za-z]+://[^/?#]*@')`,message="url must not hold a user name or password before '@': it can disguise the real host"
	// +kubebuilder:validation:XValidation:rule=`!self.trim().matches('^[A-Za-z]+://(:[0-9]*)?([/?#]|$)')`,message="url must have a host, e.g. https://example.com/"
	// +kubebuilder:validation:XValidation:rule=`!self.trim().matches('^[A-Za-z]+://[^/?#]*:[^]/?#:]+([/?#]|$)') || self.trim().matches('^[A-Za-z]+://[^/?#]*:0*([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])([/?#]|$)')`,message="url port must be a number from 1 to 65535"
	URL string `json:"url"`

	// code is an optional custom short code (1-64 of A-Z a-z 0-9 _ -). When set,
	// no code is computed; if another link in the namespace holds it first, this
	// link reports CodeConflict.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]{1,64}$`
	Code string `json:"code,omitempty"`

	// expiresAt is the instant (RFC 3339) after which the link answers 410 Gone.
	// Mutually exclusive with ttl.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// The durations' format is checked by a rule of its own, and their range
	// only for a value in that format: CEL's duration() of a string that is
	// not one fails with a type conversion error, which the API server
	// printed beside the format's message (issue 54).

	// ttl is the link's lifetime counted from its creation, as a Go duration
	// such as 168h or 90m (units h, m, s, ms, us and ns; a week is 168h).
	// Mutually exclusive with expiresAt.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="ttl must be a duration such as 168h, 90m or 1h30m: numbers, each with a unit of h, m, s, ms, us or ns (there is no d or w: a day is 24h, a week 168h)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) > duration('0s')",message="ttl must be a positive duration such as 168h or 30m"
	TTL *metav1.Duration `json:"ttl,omitempty"`

	// idleTimeout finishes the link once it has not been used for this long,
	// as a Go duration such as 720h or 30m: from status.lastUsedAt (or, before
	// the first use, from spec.activatesAt or the link's creation, the later)
	// plus idleTimeout plus the manager's --idle-grace (default 30s, so that
	// uses the redirectors have not written yet count), the link is Expired:
	// it answers 410 Gone and the reaper deletes it after
	// ttlSecondsAfterFinished. The redirectors write lastUsedAt with the uses,
	// once per --uses-flush-interval, so the link finishes at least
	// idleTimeout after its last use (provided that use is written within
	// --idle-grace: an API server away longer can finish it early) and at
	// most --idle-grace later. Works beside ttl or expiresAt (whichever
	// comes first). Unset: never idle.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="idleTimeout must be a duration such as 720h, 30m or 1h30m: numbers, each with a unit of h, m, s, ms, us or ns (there is no d or w: a day is 24h, a week 168h)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('1s')",message="idleTimeout must be a duration of at least 1s, such as 720h or 30m"
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`

	// maxUses is how many redirects the link serves before it answers 410 Gone.
	// Unset means unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxUses *int64 `json:"maxUses,omitempty"`

	// redirectStatus is the HTTP status of the redirect: 301, 302, 307 or 308.
	// Only 301 and 308 may be cached by clients.
	// +optional
	// +kubebuilder:default=302
	// +kubebuilder:validation:Enum=301;302;307;308
	RedirectStatus int32 `json:"redirectStatus,omitempty"`

	// forwardQuery appends the query string of the request to the target
	// URL. A parameter both carry is sent once, with the request's values
	// (the target's pairs of that name are dropped; names compare
	// percent-decoded).
	// +optional
	ForwardQuery bool `json:"forwardQuery,omitempty"`

	// forwardPath appends what follows the code in the short URL
	// (/<namespace>/<code>/rest/of/path) to the target's path, whichever
	// target the click goes to: dot segments cannot climb above the
	// target's path in any spelling a server honours (..;, %2e, encoded
	// twice, overlong UTF-8, look-alikes: docs/api.md), and the scheme and
	// host never change. The QR code
	// (/qr) and preview (+) paths keep their meaning and take precedence.
	// +optional
	ForwardPath bool `json:"forwardPath,omitempty"`

	// rules send the clicks that meet a rule's conditions to the rule's url:
	// tried in order, the first that matches wins; a click that none
	// matches goes to spec.url (or a variant). Each rule's url is validated,
	// canonicalized and judged by the destination policy as spec.url is:
	// a link with any target refused is Blocked (or Invalid) as a whole.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Rules []RedirectRule `json:"rules,omitempty"`

	// variants split the clicks that no rule matches among weighted
	// destinations, for A/B tests: each takes weight percent of them,
	// spec.url the rest. A client keeps its variant on every click, every
	// redirector replica and every update of its browser (the choice is a
	// hash of its address and its User-Agent without versions), and a
	// change of the weights moves only the clients it must, between the
	// variant whose weight changed and spec.url (status.splitBuckets). A
	// rule's target is a single URL: to split the clicks of a rule, make
	// its url another ShortLink with variants.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Variants []Variant `json:"variants,omitempty"`

	// variantsEnd ends the A/B test at a time: from variantsEnd.at on, the
	// clicks that no rule matches all go to variantsEnd.url (spec.url or a
	// variant's url), without a change of the spec then.
	// +optional
	VariantsEnd *VariantsEnd `json:"variantsEnd,omitempty"`

	// expiredURL is where the link sends clicks once it has finished
	// (expired, exhausted or idle) instead of answering 410 Gone; it takes
	// precedence over the namespace's fallback. Validated and judged as
	// spec.url is.
	// +optional
	ExpiredURL TargetURL `json:"expiredURL,omitempty"`

	// card is what link previewers (Slack, WhatsApp, Facebook, search
	// crawlers, mail prefetchers...) are shown instead of a redirect: a
	// page with the card's title, description and image and no
	// destination. Without it, a link with maxUses shows previewers its
	// namespace's card (annotations linkforge.io/card-title,
	// card-description, card-image) or a neutral default, and a link
	// without maxUses redirects them to spec.url. Previewers never spend a
	// use either way (docs/uses.md).
	// +optional
	Card *LinkCard `json:"card,omitempty"`

	// access gates the link behind a password or a sign-in: see
	// LinkAccess.
	// +optional
	Access *LinkAccess `json:"access,omitempty"`

	// activatesAt is the instant (RFC 3339) from which the link redirects.
	// Before it the link holds its code (status.state Scheduled, Ready with
	// reason Scheduled) but answers like an unknown code: 404, or the
	// namespace's not-found fallback. The redirectors compare it with their
	// clock on each request, so the link starts redirecting on time without
	// waiting for the controller. Unset: from when the link has its code.
	// Like Shlink's validSince.
	// +optional
	ActivatesAt *metav1.Time `json:"activatesAt,omitempty"`

	// dedupPolicy says whether the link shares its code with the links of
	// its namespace that have the same target (canonical URL, expiry,
	// activatesAt, idleTimeout, maxUses, redirectStatus, forwardQuery,
	// forwardPath, rules, variants, variantsEnd and expiredURL): IfSameTarget
	// shares one code among them; Never gives this link a code of its own,
	// the next salt no other link holds (the oldest link of a target keeps
	// salt 0). Turning it to Never moves this link's code if it shared it,
	// never another link's. Unset: the manager's --dedup flag (default
	// IfSameTarget).
	// +optional
	DedupPolicy DedupPolicy `json:"dedupPolicy,omitempty"`

	// reapPolicy says what happens once the link has finished (expired or
	// exhausted): Delete removes it after ttlSecondsAfterFinished, Retain keeps
	// it. Unset deletes it, unless a GitOps tool (Flux, Argo CD) manages it:
	// then it is kept and a Warning event asks you to remove it from its source.
	// +optional
	ReapPolicy ReapPolicy `json:"reapPolicy,omitempty"`

	// ttlSecondsAfterFinished is how long a finished link is kept before the
	// reaper deletes it. Unset means the manager's --default-ttl-after-finished.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// ShortLinkStatus is what the controller and the redirectors observed.
type ShortLinkStatus struct {
	// observedGeneration is the generation of the spec that this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// state is what the link does as of observedGeneration: Active (it
	// redirects), Scheduled (it holds its code and redirects from
	// spec.activatesAt on), Kept (its spec asks for a code another link
	// holds, and it keeps answering under the code it held before, see
	// status.code), Expired or Exhausted (it has finished: it answers 410
	// Gone, or redirects to spec.expiredURL), Pending, Conflict, Invalid or
	// Blocked (it holds no confirmed code and does not redirect).
	// Empty until the controller has seen the link. It is for people and listings: a finished link reads
	// Ready=True (it is in the state its spec asks for), so Ready alone does
	// not say whether it redirects. The redirectors and the reaper read
	// confirmedGeneration, finishedAt and uses, never state; between a
	// redirector writing the last use and the controller's next reconcile,
	// uses may already say Exhausted while state still says Active.
	// +optional
	State LinkState `json:"state,omitempty"`

	// code is the short code the link holds in its namespace; empty while it
	// holds none (for example on CodeConflict, InvalidURL or
	// DestinationNotAllowed). In state Kept it is the code the link held
	// before its spec asked for another, not spec.code.
	// +optional
	Code string `json:"code,omitempty"`

	// salt is the number of collision retries used to find a free hashed code
	// (0-9). Always 0 for a custom code.
	// +optional
	Salt int32 `json:"salt,omitempty"`

	// canonicalURL is the canonical form of spec.url that the code is computed from.
	// +optional
	CanonicalURL string `json:"canonicalURL,omitempty"`

	// shortURL is the full short URL, when the manager knows its public base URL.
	// +optional
	ShortURL string `json:"shortURL,omitempty"`

	// expiresAt is the resolved expiry: spec.expiresAt, or creation + spec.ttl.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// confirmedGeneration is the generation of the spec for which the
	// controller confirmed that the link holds status.code. The redirectors
	// serve the link under that code only while it equals
	// metadata.generation; while it is older they keep serving what they
	// served for it. 0 (or absent) means the link holds no confirmed code:
	// pending, in conflict or invalid. It is the machine-readable half of the
	// Ready condition, which is written for people.
	// +optional
	ConfirmedGeneration int64 `json:"confirmedGeneration,omitempty"`

	// finishedAt is when the link finished: the instant it expired, or when
	// the controller saw it had served all of its maxUses or had not been
	// used for its idleTimeout. From then on every
	// redirector answers 410 Gone, and the reaper counts
	// ttlSecondsAfterFinished from it. Absent while the link has not finished.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`

	// uses is how many redirects the redirectors have served for this link,
	// summed over all replicas and written back in batches (see the README,
	// "Uses"). For a link with maxUses it also counts the quota that a
	// replica reserved and could not report before its reservation expired
	// (it may have served it), so that maxUses is never exceeded.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	Uses int64 `json:"uses"`

	// variantUses counts the redirects served to each destination of the
	// split (spec.url and each of spec.variants, by url), for links with
	// variants; written by the redirectors with uses. A destination that
	// leaves the spec leaves this list at the next write.
	// +optional
	// +listType=map
	// +listMapKey=url
	// +kubebuilder:validation:MaxItems=11
	VariantUses []VariantUses `json:"variantUses,omitempty"`

	// splitBuckets are the buckets of the split each variant holds, as the
	// controller assigned them when it confirmed the spec (spec.url holds
	// the others); the redirectors split by them. A change of the weights
	// keeps each variant's buckets but those it must give up or take: a
	// variant whose weight falls gives buckets back to spec.url, one whose
	// weight rises takes buckets spec.url held, so no client moves from one
	// variant to another while spec.url has buckets to give. A variant is
	// known by its url. Absent (a link from before them, or restored
	// without its status): variant i holds the buckets after those of the
	// variants before it.
	// +optional
	// +listType=map
	// +listMapKey=url
	// +kubebuilder:validation:MaxItems=10
	SplitBuckets []SplitBuckets `json:"splitBuckets,omitempty"`

	// previewerFetches counts the GETs answered to link previewers,
	// crawlers, mail prefetchers and uptime monitors (the classes of
	// docs/uses.md that read a link without following it for a person):
	// a card, or a redirect for a link without maxUses and without a card.
	// They are not uses: they never spend maxUses, never move lastUsedAt
	// and never count in variantUses. Written by the redirectors with
	// uses, approximately (a write whose answer is lost counts again).
	// +optional
	// +kubebuilder:validation:Minimum=0
	PreviewerFetches int64 `json:"previewerFetches,omitempty"`

	// ruleCount and variantCount are how many rules and variants the spec of
	// observedGeneration has (the Rules and Variants columns of -o wide).
	// +optional
	RuleCount int32 `json:"ruleCount,omitempty"`
	// +optional
	VariantCount int32 `json:"variantCount,omitempty"`

	// lastUsedAt is when the link was last used, as the redirectors report
	// it: each write of uses also sets it, in the same write, to the time of
	// that write rounded up to the second (never an extra write per use).
	// It is therefore never earlier than the last use and at most about one
	// --uses-flush-interval (10s) later, more while a redirector's write
	// budget is short. It never moves back. Absent until the first use is
	// written. spec.idleTimeout counts from it.
	// +optional
	LastUsedAt *metav1.Time `json:"lastUsedAt,omitempty"`

	// useReservations are the blocks of quota that redirector replicas have
	// reserved to serve a link with maxUses, one per replica. A replica serves
	// such a link only from its reservation, so uses plus every reservation's
	// quota never exceeds maxUses. Written by the redirectors only.
	// +optional
	// +listType=map
	// +listMapKey=holder
	// +kubebuilder:validation:MaxItems=64
	UseReservations []UseReservation `json:"useReservations,omitempty"`

	// conditions: Ready (always), Expired, Exhausted, and Reconciling and
	// Stalled while true. Ready is True once the link is in the state its
	// spec asks for, finished included (reason Expired or Exhausted): see state
	// for whether it redirects.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// UseReservation is a block of a link's maxUses quota held by one
// redirector replica, like a lease: the holder serves at most quota more
// redirects from it, reports what it served at each flush, and must renew it
// before expiresAt. An expired reservation is taken back by the next
// replica that reserves; what it still held is counted in status.uses,
// because its holder may have served it before it stopped.
type UseReservation struct {
	// holder identifies the redirector replica (pod name and process).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Holder string `json:"holder"`

	// quota is how many uses the holder may still serve or has served
	// without reporting them yet.
	// +required
	// +kubebuilder:validation:Minimum=0
	Quota int64 `json:"quota"`

	// expiresAt is when the reservation lapses unless its holder renews it.
	// +required
	ExpiresAt metav1.MicroTime `json:"expiresAt"`

	// peer is where holders of v0.3.0 took forwarded uses, unauthenticated.
	// This release never writes it and never forwards to it: a v0.3.0
	// replica believes any answer there, so a holder that published its
	// address here could be impersonated at that address (a reused pod IP)
	// and push a v0.3.0 replica past maxUses during an upgrade. It stays in
	// the schema for the reservations v0.3.0 replicas write.
	// +optional
	// +kubebuilder:validation:MaxLength=261
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._\[\]:-]+:[0-9]{1,5}$`
	Peer string `json:"peer,omitempty"`

	// peerAddress is the address (host:port) at which the other replicas
	// ask the holder to serve a use from this quota, so that a click on a
	// replica without quota need not wait for a status write; they speak
	// peerProtocol there. Empty: the holder takes no such requests.
	// +optional
	// +kubebuilder:validation:MaxLength=261
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._\[\]:-]+:[0-9]{1,5}$`
	PeerAddress string `json:"peerAddress,omitempty"`

	// peerProtocol is the protocol the holder speaks at peerAddress:
	// hmac-v1, requests and answers authenticated with the installation's
	// peer key. The other replicas forward uses only to a holder that
	// speaks theirs.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+$`
	PeerProtocol string `json:"peerProtocol,omitempty"`

	// returnRequested is set by another replica that could not reach the
	// holder at its peer address (or got no authenticated answer there):
	// the holder returns the unused quota at once, so that the clicks on
	// the others are served without waiting for the reservation to lapse.
	// +optional
	ReturnRequested bool `json:"returnRequested,omitempty"`
}

// PeerProtocolHMACv1 is the peer port's protocol since the peer key
// (internal/peer): every request and answer carries an HMAC-SHA256.
const PeerProtocolHMACv1 = "hmac-v1"

// ShortLink is a short code in a namespace that redirects to a URL.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sl,categories=linkforge
// +kubebuilder:printcolumn:name="Code",type=string,JSONPath=`.status.code`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Ready=True: in the state the spec asks for, including finished (see State)"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="Active redirects; Scheduled redirects from spec.activatesAt on; Kept answers under the code it held before its spec asked for a taken one; Expired and Exhausted answer 410 Gone (or redirect to spec.expiredURL); Pending, Conflict, Invalid and Blocked do not redirect"
// +kubebuilder:printcolumn:name="Activates",type=string,JSONPath=`.spec.activatesAt`,priority=1,description="spec.activatesAt: when the link starts redirecting (RFC 3339); empty if from the start"
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expiresAt`,description="When the link expires (RFC 3339); empty if never"
// +kubebuilder:printcolumn:name="Uses",type=integer,JSONPath=`.status.uses`
// +kubebuilder:printcolumn:name="Last Used",type=date,JSONPath=`.status.lastUsedAt`,priority=1,description="status.lastUsedAt: when the link was last used, to a redirector flush interval; empty if never"
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxUses`,priority=1,description="spec.maxUses: redirects served before the link answers 410 Gone; empty if unlimited"
// +kubebuilder:printcolumn:name="Rules",type=integer,JSONPath=`.status.ruleCount`,priority=1,description="How many redirect rules (spec.rules) the link has"
// +kubebuilder:printcolumn:name="Variants",type=integer,JSONPath=`.status.variantCount`,priority=1,description="How many weighted variants (spec.variants) split the clicks no rule matches"
// +kubebuilder:printcolumn:name="Previews",type=integer,JSONPath=`.status.previewerFetches`,priority=1,description="status.previewerFetches: GETs from link previewers, crawlers, prefetchers and monitors, which are not uses"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// Who holds or asks for a code, without listing the namespace:
// kubectl get sl --field-selector status.code=CODE (or spec.code=CODE).
// +kubebuilder:selectablefield:JSONPath=`.spec.code`
// +kubebuilder:selectablefield:JSONPath=`.status.code`
type ShortLink struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired short link.
	// +required
	Spec ShortLinkSpec `json:"spec"`

	// status is the observed state of the short link. A new link's status
	// defaults to observedGeneration -1, as Flux's own kinds do: kstatus
	// (Flux health checks, wait: true) then reads a link the controller has
	// not seen yet as InProgress instead of Current, which it reads for an
	// object with neither observedGeneration nor conditions.
	// +optional
	// +kubebuilder:default={"observedGeneration":-1}
	Status ShortLinkStatus `json:"status,omitempty"`
}

// ShortLinkList is a list of ShortLinks.
// +kubebuilder:object:root=true
type ShortLinkList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ShortLink `json:"items"`
}
