package migrate

import "github.com/crdver/kubectl-crdver/internal/testenv"

// TestingEnv is the package's API server (TestMain), for the tests of package migrate_test,
// which may import the packages that import migrate (preflight, plan).
func TestingEnv() *testenv.Env { return env }
