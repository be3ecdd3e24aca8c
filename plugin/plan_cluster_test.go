package plugin

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/plan"
)

// TestPlanCluster runs the command against the test API server: widgets exist (with objects),
// gizmos are new; nothing is written.
func TestPlanCluster(t *testing.T) {
	ctx := context.Background()
	crd := installCRDFile(t, planFile("widgets-old.yaml"))
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(planFile("widgets-objects.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(schema.GroupVersionResource{Group: crd.Spec.Group, Version: "v1", Resource: "widgets"}).Namespace("default").
			Create(ctx, u, metav1.CreateOptions{FieldManager: "widget-controller"}); err != nil {
			t.Fatal(err)
		}
	}
	r := runCluster(t, "plan", "-f", planFile("widgets-new.yaml"), "-f", planFile("gizmos.yaml"), "-o", "json", "--chunk-size", "2", "--progress-interval", "1ms")
	if r.code != ExitProblems {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var rep plan.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Items) != 2 {
		t.Fatalf("items: %+v", rep.Items)
	}
	w, g := rep.Items[0], rep.Items[1]
	if w.Operation != "update" || w.Objects.Evaluated != 7 || w.Objects.Total != 7 || len(w.Objects.Findings) != 7 || !w.Breaking {
		t.Errorf("widgets: %+v", w)
	}
	if len(w.ManagedFields) != 1 || w.ManagedFields[0].Managers[0] != "widget-controller" || w.ManagedFields[0].Objects != 7 {
		t.Errorf("managedFields: %+v", w.ManagedFields)
	}
	if g.Operation != "create" || !g.Apply.Allowed || g.Breaking {
		t.Errorf("gizmos: %+v", g)
	}
	mustContain(t, "stderr", r.stderr, "plan widgets.plan.example.com: ", "/7 objects evaluated")

	// (spec.tier is unknown to the old CRD, so it was pruned on create: every object lacks it.)
	// Nothing was written: gizmos do not exist, and the live CRD against itself is clean.
	c, err := newCRDClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "gizmos.plan.example.com", metav1.GetOptions{}); !isNotFound(err) {
		t.Errorf("gizmos: %v", err)
	}
	r = runCluster(t, "plan", "-f", planFile("widgets-old.yaml"))
	if r.code != ExitOK {
		t.Errorf("the live CRD against itself: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "output", r.stdout, "Objects: 7 of 7 evaluated at v1, 0 with findings", "Schema changes: none")
}
