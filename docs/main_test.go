package docs

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// envtest logs through controller-runtime's logger, which complains with a stack trace
	// when nobody set it.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
