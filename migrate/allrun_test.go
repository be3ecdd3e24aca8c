package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/preflight"
)

// allFixture creates a CRD whose v1beta1 (storage) holds spec.size and spec.legacy and whose
// v1 holds spec.size only (conversion None), n objects at v1beta1 (with spec.legacy when
// legacy), and, unless clean, makes v1 the storage version: its migration is then pending,
// and rewriting the objects at v1 drops spec.legacy.
func allFixture(t *testing.T, name string, n int, legacy, clean bool) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	ctx := context.Background()
	env := migrate.TestingEnv()
	group := name + ".all.example.com"
	crd := testenv.TwoVersionCRD(group, "gizmos", "Gizmo", apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"size": {Type: "integer"}, "legacy": {Type: "string"},
	}})
	delete(crd.Spec.Versions[1].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "legacy")
	env.CreateCRDForTest(t, crd)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	gvr := schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "gizmos"}
	for i := 0; i < n; i++ {
		spec := map[string]any{"size": int64(i)}
		if legacy {
			spec["legacy"] = "kept only by v1beta1"
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1beta1", "kind": "Gizmo",
			"metadata": map[string]any{"name": fmt.Sprintf("gizmo-%d", i), "namespace": "default"},
			"spec":     spec,
		}}
		if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := clients(t)
	if !clean {
		if _, err := migrate.SwitchStorage(ctx, c, crd.Name, "v1"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func clients(t *testing.T) *migrate.Clients {
	t.Helper()
	c, err := migrate.NewClients(migrate.TestingEnv().Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newAll is migrate.All as the command wires it: the real preflight (package preflight) and
// the consent rule (plan.Consent) deciding the refusal; every checkpoint in a temporary folder.
func newAll(t *testing.T, consent plan.Consent, dry bool) (*migrate.All[*preflight.Report], *[]string) {
	t.Helper()
	c := clients(t)
	dir := t.TempDir()
	var calls []string
	a := &migrate.All[*preflight.Report]{
		Clients: c, DryRun: dry,
		Rewrite:    migrate.RewriteOptions{Concurrency: 2, ChunkSize: 10},
		Checkpoint: func(crd string) (string, error) { return filepath.Join(dir, crd+".json"), nil },
		Planned: func(r *migrate.AllReport[*preflight.Report]) {
			calls = append(calls, fmt.Sprintf("planned %d", len(r.Plans)))
		},
		PreWrite: func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (*preflight.Report, error) {
			calls = append(calls, "preflight "+crd.Name)
			return preflight.Check(ctx, c.Dynamic, crd, preflight.Options{})
		},
		Refuse: func(found []*preflight.Report) error {
			for _, r := range found {
				if len(consent.Refusals(plan.PreflightKinds(r))) > 0 {
					return fmt.Errorf("%s: %d objects would lose fields", r.CRD, r.LossCount)
				}
			}
			return nil
		},
		Confirm: func(_ context.Context, r *migrate.AllReport[*preflight.Report]) (bool, error) {
			calls = append(calls, fmt.Sprintf("confirm %d objects", r.Objects))
			return true, nil
		},
	}
	return a, &calls
}

// storedVersions of crd as the API server has them now.
func storedVersions(t *testing.T, name string) string {
	t.Helper()
	crd, err := clients(t).CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(crd.Status.StoredVersions, ",")
}

// etcdAt counts crd's objects by the apiVersion etcd holds them at.
func etcdAt(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) map[string]int {
	t.Helper()
	counts, _, err := migrate.TestingEnv().StoredAPIVersions(context.Background(), crd.Spec.Group, crd.Spec.Names.Plural)
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// migrate --all's library at its API: the report, the hooks called and how the run ended (its
// exit code, docs/exit-codes.md) for nothing pending, one CRD pending (dry run, then the run),
// one refused (data loss without consent: nothing written) and the same with consent.
func TestAllRun(t *testing.T) {
	ctx := context.Background()

	t.Run("nothing pending", func(t *testing.T) {
		clean := allFixture(t, "allclean", 3, false, true)
		a, calls := newAll(t, plan.Consent{}, false)
		rep, err := a.Run(ctx, []*apiextensionsv1.CustomResourceDefinition{clean})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Plans) != 0 || len(rep.Items) != 0 || rep.CRDs != 1 || rep.Outcome.ExitCode != 0 || rep.Outcome.Worst != migrate.OutcomeDone {
			t.Errorf("report %+v", rep)
		}
		if got := strings.Join(*calls, "; "); got != "planned 0" {
			t.Errorf("hooks called: %s; want only Planned (no preflight, no question)", got)
		}
		if got := etcdAt(t, clean); got[clean.Spec.Group+"/v1beta1"] != 3 {
			t.Errorf("the clean CRD's objects in etcd: %v", got)
		}
	})

	t.Run("one pending", func(t *testing.T) {
		clean := allFixture(t, "allone0", 2, false, true)
		crd := allFixture(t, "allone1", 4, false, false)
		crds := []*apiextensionsv1.CustomResourceDefinition{clean, crd}

		dry, calls := newAll(t, plan.Consent{}, true)
		rep, err := dry.Run(ctx, crds)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Plans) != 1 || rep.Plans[0].CRD != crd.Name || rep.Objects != 4 || len(rep.Items) != 0 || !rep.DryRun || rep.Outcome.ExitCode != 0 {
			t.Errorf("dry run: report %+v", rep)
		}
		if got, want := strings.Join(*calls, "; "), "planned 1; preflight "+crd.Name; got != want {
			t.Errorf("dry run: hooks %q, want %q", got, want)
		}
		if sv := storedVersions(t, crd.Name); sv != "v1beta1,v1" {
			t.Errorf("dry run: storedVersions %s", sv)
		}

		a, calls := newAll(t, plan.Consent{}, false)
		rep, err = a.Run(ctx, crds)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(*calls, "; "), "planned 1; preflight "+crd.Name+"; confirm 4 objects"; got != want {
			t.Errorf("hooks %q, want %q", got, want)
		}
		if len(rep.Items) != 1 || rep.Interrupted {
			t.Fatalf("report %+v", rep)
		}
		it := rep.Items[0]
		if it.CRD != crd.Name || it.Outcome != migrate.OutcomeDone || it.Result.Rewritten != 4 || it.Trim == nil || !it.Trim.Trimmed {
			t.Errorf("item %+v", it)
		}
		if len(rep.Preflight) != 1 || !rep.Preflight[0].Safe() {
			t.Errorf("preflight %+v", rep.Preflight)
		}
		if o := rep.Outcome; o.ExitCode != 0 || o.Worst != migrate.OutcomeDone || len(o.NotDone) != 0 || len(o.ManagersLost) != 0 {
			t.Errorf("outcome %+v", o)
		}
		if got := etcdAt(t, crd); got[crd.Spec.Group+"/v1"] != 4 || len(got) != 1 {
			t.Errorf("in etcd: %v; want all 4 at v1", got)
		}
		if sv := storedVersions(t, crd.Name); sv != "v1" {
			t.Errorf("storedVersions %s, want v1", sv)
		}
	})

	t.Run("refused, then consented", func(t *testing.T) {
		crd := allFixture(t, "allloss", 3, true, false)
		crds := []*apiextensionsv1.CustomResourceDefinition{crd}

		a, calls := newAll(t, plan.Consent{SkipInvalid: true}, false) // no consent to data loss
		rep, err := a.Run(ctx, crds)
		var se *migrate.StepError
		if !errors.As(err, &se) || se.Step != migrate.StepRefused || !strings.Contains(err.Error(), "3 objects would lose fields") {
			t.Fatalf("err = %v, want the refusal (step %q)", err, migrate.StepRefused)
		}
		if rep.Outcome.ExitCode != 1 || len(rep.Items) != 0 || len(rep.Plans) != 1 {
			t.Errorf("refused: outcome %+v, report %+v", rep.Outcome, rep)
		}
		if len(rep.Preflight) != 1 || rep.Preflight[0].LossCount != 3 {
			t.Errorf("refused: preflight %+v", rep.Preflight)
		}
		if strings.Contains(strings.Join(*calls, "; "), "confirm") {
			t.Errorf("refused: asked %q", *calls)
		}
		if got := etcdAt(t, crd); got[crd.Spec.Group+"/v1beta1"] != 3 || len(got) != 1 {
			t.Errorf("refused: written: %v in etcd", got)
		}

		a, _ = newAll(t, plan.Consent{AllowDataLoss: true}, false)
		rep, err = a.Run(ctx, crds)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Items) != 1 || rep.Items[0].Outcome != migrate.OutcomeDone || rep.Items[0].Result.Rewritten != 3 || rep.Outcome.ExitCode != 0 {
			t.Errorf("consented: items %+v, outcome %+v", rep.Items, rep.Outcome)
		}
		if got := etcdAt(t, crd); got[crd.Spec.Group+"/v1"] != 3 || len(got) != 1 {
			t.Errorf("consented: in etcd %v; want all 3 at v1", got)
		}
		obj, _, err := migrate.TestingEnv().StoredObject(ctx, crd.Spec.Group, "gizmos", "default", "gizmo-0")
		if err != nil {
			t.Fatal(err)
		}
		if spec, _ := obj["spec"].(map[string]any); spec["legacy"] != nil {
			t.Errorf("consented: spec.legacy still stored: %v", spec)
		}
	})
}

// A run stopped after the question ends "could not complete" (exit 3): cancelled (Ctrl-C) as
// it was answered, every CRD is "not run"; not confirmed, nothing is run.
func TestAllOutcome(t *testing.T) {
	crd := allFixture(t, "alloutcome", 1, false, false)
	a, _ := newAll(t, plan.Consent{}, false)
	a.Refuse = nil
	ctx, cancel := context.WithCancel(context.Background())
	a.Confirm = func(context.Context, *migrate.AllReport[*preflight.Report]) (bool, error) { cancel(); return true, nil }
	rep, err := a.Run(ctx, []*apiextensionsv1.CustomResourceDefinition{crd})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || rep.Outcome.ExitCode != 3 || strings.Join(rep.Outcome.NotDone, ",") != crd.Name+" (not run)" {
		t.Errorf("cancelled at the question: interrupted %v, outcome %+v", rep.Interrupted, rep.Outcome)
	}

	a.Confirm = func(context.Context, *migrate.AllReport[*preflight.Report]) (bool, error) { return false, nil }
	rep, err = a.Run(context.Background(), []*apiextensionsv1.CustomResourceDefinition{crd})
	if !errors.Is(err, migrate.ErrNotConfirmed) || rep.Outcome.ExitCode != 3 || len(rep.Items) != 0 {
		t.Errorf("not confirmed: err %v, outcome %+v", err, rep.Outcome)
	}
}
