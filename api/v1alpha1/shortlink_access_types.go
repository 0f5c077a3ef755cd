package v1alpha1

// LinkAccess gates a link: its redirect is given only to whoever knows its
// password, or is signed in (through the auth proxy the redirector trusts)
// as one of its users or a member of one of its groups; passing either
// gate is enough. A gated link shows previewers its card and never its
// destination; HEAD, the QR code and the preview page of it reveal nothing
// of where it goes either (docs/api.md, docs/security.md).
// +kubebuilder:validation:XValidation:rule="has(self.passwordHash) || has(self.users) || has(self.groups)",message="access gates the link with a passwordHash, users or groups: set at least one, or remove access"
type LinkAccess struct {
	// passwordHash is the bcrypt hash of the link's password ($2b$, cost
	// 10 to 12), never the password: the redirector answers a GET with a
	// form, and redirects (spending a use of maxUses) once the right
	// password is posted. Anyone who may read the ShortLink can read the
	// hash and guess offline at bcrypt's cost: choose a password of 4
	// random words or more. `kubectl linkforge create --password-prompt`
	// writes it.
	// +optional
	// +kubebuilder:validation:MaxLength=60
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[$]2[aby][$]1[0-2][$][./A-Za-z0-9]{53}$')`,message="passwordHash must be a bcrypt hash of cost 10 to 12 ($2b$10$ and 53 characters of [./A-Za-z0-9]): write the hash, never the password (kubectl linkforge create --password-prompt makes one)"
	PasswordHash string `json:"passwordHash,omitempty"`

	// users are the signed-in users the link opens for, as the trusted
	// auth proxy names them (the redirector's --auth-user-header, e.g.
	// oauth2-proxy's X-Forwarded-User or X-Forwarded-Email).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Users []string `json:"users,omitempty"`

	// groups are the groups whose signed-in members the link opens for, as
	// the trusted auth proxy names them (--auth-groups-header, e.g.
	// X-Forwarded-Groups, comma-separated).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Groups []string `json:"groups,omitempty"`
}
