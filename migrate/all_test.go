package migrate

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// modRevisions reads each object of f straight from etcd: the revision it was last written at.
func modRevisions(t *testing.T, f *fixture, n int) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("widget-%05d", i)
		_, rev, err := env.StoredObject(context.Background(), f.group, "widgets", f.ns[i%len(f.ns)], name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = rev
	}
	return out
}

// migrate --all's library: of five CRDs, two already clean, only the three pending ones are
// rewritten (etcd proves it: the clean ones' objects keep their revisions) and trimmed.
func TestRunAllMigratesOnlyThePendingCRDs(t *testing.T) {
	ctx := context.Background()
	const n = 30
	var pending, clean []*fixture
	for i := 0; i < 3; i++ {
		pending = append(pending, newFixture(t, fmt.Sprintf("allp%d", i), n, false))
	}
	for i := 0; i < 2; i++ {
		clean = append(clean, newFixture(t, fmt.Sprintf("allc%d", i), n, true))
	}
	c := pending[0].clients
	list, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ours []*fixture
	ours = append(append(ours, pending...), clean...)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := range list.Items {
		for _, f := range ours {
			if list.Items[i].Name == "widgets."+f.group {
				crds = append(crds, &list.Items[i])
			}
		}
	}
	if len(crds) != 5 {
		t.Fatalf("found %d of the 5 CRDs", len(crds))
	}
	selected := Pending(crds)
	var names []string
	for _, crd := range selected {
		names = append(names, crd.Name)
	}
	if want := "widgets.allp0.migrate.example.com widgets.allp1.migrate.example.com widgets.allp2.migrate.example.com"; strings.Join(names, " ") != want {
		t.Fatalf("Pending selected %v, want %s", names, want)
	}

	before := map[string]map[string]int64{}
	for _, f := range clean {
		before[f.group] = modRevisions(t, f, n)
	}
	plans, err := PlanAll(ctx, c, selected, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	progress := &AllProgress{}
	res := RunAll(ctx, c, plans, AllOptions{
		Rewrite:    RewriteOptions{Concurrency: 4, ChunkSize: 10},
		Trim:       true,
		Checkpoint: func(crd string) (string, error) { return filepath.Join(dir, crd+".json"), nil },
		OnRewrite:  progress.Start,
	})
	if res.Interrupted || len(res.Items) != 3 {
		t.Fatalf("result %+v", res)
	}
	for _, it := range res.Items {
		if it.Outcome != OutcomeDone || it.Result.Rewritten != n || it.Trim == nil || !it.Trim.Trimmed {
			t.Errorf("%s: outcome %s, error %q, result %+v, trim %+v", it.CRD, it.Outcome, it.Error, it.Result, it.Trim)
		}
	}
	if got := progress.Progress(); got.Rewritten != 3*n {
		t.Errorf("progress %+v, want %d rewritten", got, 3*n)
	}
	for _, f := range pending {
		counts, _ := etcdVersions(t, f.group, "widgets")
		if counts[f.group+"/v1"] != n || len(counts) != 1 {
			t.Errorf("%s in etcd: %v; want all %d at v1", f.group, counts, n)
		}
		if sv := f.get(t).Status.StoredVersions; strings.Join(sv, ",") != "v1" {
			t.Errorf("%s storedVersions %v", f.group, sv)
		}
	}
	for _, f := range clean {
		if after := modRevisions(t, f, n); fmt.Sprint(after) != fmt.Sprint(before[f.group]) {
			t.Errorf("%s (clean) was written: etcd revisions changed", f.group)
		}
		counts, _ := etcdVersions(t, f.group, "widgets")
		if counts[f.group+"/v1beta1"] != n || len(counts) != 1 {
			t.Errorf("%s (clean) in etcd: %v; want all %d at its storage version v1beta1", f.group, counts, n)
		}
	}
}

// A cancelled run (Ctrl-C) marks the CRD it was on "interrupted", not "failed", and the CRDs
// after it "not run".
func TestRunAllInterruptedIsNotFailed(t *testing.T) {
	f1 := newFixture(t, "allint1", 20, false)
	f2 := newFixture(t, "allint2", 20, false)
	c := f1.clients
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range []*fixture{f1, f2} {
		crds = append(crds, f.get(t))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plans, err := PlanAll(ctx, c, crds, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	res := RunAll(ctx, c, plans, AllOptions{
		Rewrite:    RewriteOptions{Concurrency: 1, ChunkSize: 5},
		Trim:       true,
		Checkpoint: func(crd string) (string, error) { return filepath.Join(dir, crd+".json"), nil },
		OnRewrite:  func(string, *Rewriter) { cancel() }, // Ctrl-C as the first rewrite starts
	})
	if !res.Interrupted || len(res.Items) != 2 {
		t.Fatalf("result %+v, want interrupted with 2 items", res)
	}
	if it := res.Items[0]; it.Outcome != OutcomeInterrupted {
		t.Errorf("%s: outcome %q (error %q), want %q", it.CRD, it.Outcome, it.Error, OutcomeInterrupted)
	}
	if it := res.Items[1]; it.Outcome != OutcomeNotRun {
		t.Errorf("%s: outcome %q, want %q", it.CRD, it.Outcome, OutcomeNotRun)
	}
}
