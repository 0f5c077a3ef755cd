// Package v1alpha1 contains the linkforge.io/v1alpha1 API: the ShortLink kind and
// the DestinationDenyList kind of the destination policy.
// +kubebuilder:object:generate=true
// +groupName=linkforge.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "linkforge.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme. It
	// is apimachinery's, not controller-runtime's (deprecated there), so
	// that importing the API pulls in nothing but apimachinery.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ShortLink{}, &ShortLinkList{}, &DestinationDenyList{}, &DestinationDenyListList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
