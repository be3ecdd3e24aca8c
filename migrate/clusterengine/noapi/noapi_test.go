// Package noapi checks the cluster engine's error when storagemigration.k8s.io is not served
// (its API server runs with that API switched off, hence a package of its own).
package noapi

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/plugin"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env, testenv.Options{
		APIServerArgs: []string{"--runtime-config=storagemigration.k8s.io/v1=false,storagemigration.k8s.io/v1beta1=false"},
	})
}

func TestClusterEngineWithoutTheAPI(t *testing.T) {
	ctx := context.Background()
	crd, err := env.CreateCRD(ctx, testcrd.New("noapi.example.com", "Thing", testcrd.Cluster(), testcrd.Versions("v1beta1", "v1"), testcrd.Storage("v1beta1"),
		testcrd.Schema(apiextensionsv1.JSONSchemaProps{Type: "object"})))
	if err != nil {
		t.Fatal(err)
	}
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := plugin.NewRootCmd(streams)
	root.SetArgs([]string{"migrate", crd.Name, "--to", "v1", "--engine", "cluster", "--yes", "--kubeconfig", env.Kubeconfig})
	err = root.ExecuteContext(ctx)
	if plugin.ExitCode(err) != plugin.ExitUnavailable || err == nil || !strings.Contains(err.Error(), "the cluster does not serve the storagemigration.k8s.io API") {
		t.Fatalf("exit %d, err %v, want 3 and a clear error:\n%s%s", plugin.ExitCode(err), err, out, errOut)
	}
	after, err := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != crd.ResourceVersion {
		t.Errorf("the CRD was changed (storage switched?) although the engine is unavailable")
	}
}
