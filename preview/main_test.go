package preview

import (
	"flag"
	"testing"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// env is the package's real kube-apiserver + etcd: the oracle of the preview tests.
var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	testenv.Main(m, &env, testenv.Options{})
}
