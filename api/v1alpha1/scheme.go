package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// NewScheme returns a scheme with Kubernetes' built-in kinds and
// Userland's: the one scheme the controller, the gateway, the plugin,
// `userland dev` and the tests all use.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// Both only register types; they fail only on a programming error
	// (two types under one kind), which no input can cause.
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
