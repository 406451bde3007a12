package v1alpha1_test

import (
	"os"
	"testing"

	"github.com/userland-dev/userland/internal/testenv"
)

// env is a real kube-apiserver with the generated CRDs: schema, CEL rules,
// defaults and printer columns are what the server decides, so they are
// tested against one.
var env *testenv.Environment

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Mode: testenv.APIOnly}, &env))
}
