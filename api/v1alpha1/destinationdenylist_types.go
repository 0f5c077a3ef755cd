package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HostPattern is one entry of a destination list: an exact host
// (docs.example.com), a "*." wildcard that matches every host below a domain
// but not the domain itself (*.example.com), an IPv4 address in dotted
// decimal (169.254.169.254) or an IPv6 address in brackets ([fd00:ec2::254]).
// Case and trailing dots are ignored; a non-ASCII domain is written in its
// ASCII (punycode) form; there is no port: a pattern matches every port. The
// grammar is internal/hostpolicy's (its package doc is normative); the same
// rule is the linkforge.io/allowed-hosts annotation's.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=256
// +kubebuilder:validation:XValidation:rule=`self.lowerAscii().find('^.*[^.]').matches('^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])[.]){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$') || self.lowerAscii().find('^.*[^.]').matches('^\\[[0-9a-f:.]+\\]$') || (self.lowerAscii().find('^.*[^.]').matches('^([*][.])?[a-z0-9_-]+([.][a-z0-9_-]+)*$') && !self.lowerAscii().find('^.*[^.]').matches('(^|[.])([0-9]+|0x[0-9a-f]*)$'))`,message="must be a host pattern: an exact host (docs.example.com), a wildcard (*.example.com), an IPv4 address (169.254.169.254) or an IPv6 address in brackets ([fd00:ec2::254]); no scheme, port or path; a non-ASCII domain in its ASCII (punycode) form; a name whose last label is a number must be a whole IPv4 address"
type HostPattern string

// DestinationDenyListSpec lists the hosts no ShortLink may redirect to.
type DestinationDenyListSpec struct {
	// hosts no ShortLink in any namespace may redirect to: exact hosts,
	// "*." wildcards (below a domain, not the domain itself), IPv4 and
	// bracketed IPv6 addresses. Every port of a listed host is denied.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	Hosts []HostPattern `json:"hosts"`
}

// DestinationDenyList is a list of hosts that no ShortLink in the cluster may
// redirect to, such as the cloud metadata address or internal domains. Every
// DestinationDenyList applies to every namespace. The linkforge-denied-hosts
// ValidatingAdmissionPolicy (config/destination-policy, or the Helm chart's
// destinationPolicy.enabled) refuses such links when they are applied; the
// manager reports links that a list denies after they were admitted (state
// Blocked, reason DestinationNotAllowed) and they are not served.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ddl,categories=linkforge
// +kubebuilder:printcolumn:name="Hosts",type=string,JSONPath=`.spec.hosts`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DestinationDenyList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec lists the denied hosts.
	// +required
	Spec DestinationDenyListSpec `json:"spec"`
}

// DestinationDenyListList is a list of DestinationDenyLists.
// +kubebuilder:object:root=true
type DestinationDenyListList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DestinationDenyList `json:"items"`
}
