package v1alpha1

// Bounds of a link's card: what a chat app shows of a link fits in them
// (Open Graph titles are cut near 60-90 characters, descriptions near
// 200-300), and they bound the page the redirector renders.
const (
	MaxCardTitle       = 200
	MaxCardDescription = 500
)

// LinkCard is what link previewers (chat and social apps unfurling a
// pasted link, crawlers, mail prefetchers, monitors) are shown of a link
// instead of being redirected: a small HTML page with Open Graph and
// Twitter Card tags that names no destination. A link with a card shows
// it to every previewer; a link with maxUses and no card shows a neutral
// one (its namespace's, else a default), so that a previewer never spends
// a use nor sees what a use leads to (docs/uses.md).
// +kubebuilder:validation:XValidation:rule="has(self.title) || has(self.description) || has(self.image)",message="a card needs at least one of title, description and image"
type LinkCard struct {
	// title is the card's headline (og:title), 1-200 characters of text.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule=`!self.matches('[\x00-\x1f\x7f]')`,message="title must not contain control characters (bytes 0x00-0x1F or 0x7F), such as CR or LF"
	Title string `json:"title,omitempty"`

	// description is the card's text under the title (og:description),
	// at most 500 characters; line breaks are kept as spaces.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=500
	// +kubebuilder:validation:XValidation:rule=`!self.matches('[\x00-\x08\x0b-\x1f\x7f]')`,message="description must not contain control characters other than tab and line feed"
	Description string `json:"description,omitempty"`

	// image is the URL of the card's picture (og:image): an absolute http
	// or https URL, validated, canonicalized and judged by the destination
	// policy as spec.url is (a link whose image host is not allowed is
	// Blocked). Previewers fetch it themselves; the redirector never does.
	// +optional
	Image TargetURL `json:"image,omitempty"`
}
