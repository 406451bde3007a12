// Package v1alpha1 contains the Userland API: Template, ClusterTemplate and
// Userland in the userland.dev group.
// +kubebuilder:object:generate=true
// +groupName=userland.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "userland.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers every kind of this package. The package depends
// only on apimachinery and core types, so clients can import it cheaply.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Template{}, &TemplateList{},
		&ClusterTemplate{}, &ClusterTemplateList{},
		&Userland{}, &UserlandList{},
		&Course{}, &CourseList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
