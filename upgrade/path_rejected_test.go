package upgrade

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/plan"
)

// TestRunPathJudgesTheSecondHopAsTheServer: the target release requires spec.color, which
// w-nocolor lacks, and drops spec.legacy, which it holds; only the second hop of the path
// meets them. The path's preflight, before any write, judges w-nocolor at hop 2 as hop 1
// leaves it and as the consented loss leaves it: it loses spec.legacy (refused without
// --allow-data-loss) and is then invalid on re-create, not rejected on its next write (the
// API server ratchets: an update that leaves spec as the server reads it is accepted). With
// --allow-data-loss the path completes, exit 1 with w-nocolor left to fix, and the real server
// agrees object by object: an update of w-nocolor is accepted, its re-create is rejected for
// spec.color.
func TestRunPathJudgesTheSecondHopAsTheServer(t *testing.T) {
	ctx := context.Background()
	group := "hop2reject.run.example.com"
	live := testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(true)))
	mid := testcrd.New(group, "Widget", testcrd.Version("v1", true, false, widgetSchema(true)), testcrd.Version("v2", true, true, widgetSchema(true)))
	target := testcrd.New(group, "Widget", testcrd.Version("v2", true, true, widgetSchema(false)))
	spec := target.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Required = []string{"color"}
	target.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	f := newRunFx(t, live, target, map[string]map[string]any{
		"w-nocolor": {"size": int64(1), "legacy": "keep-me"},
		"w-red":     {"size": int64(2), "color": "red"},
	})
	o := PathOptions{
		Options: Options{ApplyFile: "v0.3.0/", BackupFile: f.backup, Checkpoint: f.cp},
		Via:     []plan.PathRelease{{Name: "v0.2.0", File: "v0.2.0/", CRDs: []*apiextensionsv1.CustomResourceDefinition{mid}}},
		Target:  plan.PathRelease{Name: "v0.3.0", File: "v0.3.0/", CRDs: []*apiextensionsv1.CustomResourceDefinition{target}},
	}
	o.Next = o.Target.CRDs
	before := f.clusterMark(t)

	rep, err := RunPath(ctx, f.c, o)
	if !errors.Is(err, ErrRefused) || !slices.Equal(rep.Outcome.Refusals, []plan.Kind{plan.KindDataLoss}) {
		t.Fatalf("RunPath without consent: %v, refusals %v, want refused for data-loss alone", err, rep.Outcome.Refusals)
	}
	if len(rep.Preflight) != 2 {
		t.Fatalf("preflight of %d hops, want 2: %+v", len(rep.Preflight), rep.Preflight)
	}
	hp := rep.Preflight[1]
	if len(hp.DataLoss) != 1 || hp.DataLoss[0].Name != "w-nocolor" || !slices.Equal(hp.DataLoss[0].Fields, []string{"spec.legacy"}) {
		t.Errorf("hop 2's data loss: %+v, want w-nocolor losing spec.legacy", hp.DataLoss)
	}
	if len(hp.Rejected) != 0 {
		t.Errorf("hop 2's rejected writes: %+v, want none (the server ratchets an unchanged spec)", hp.Rejected)
	}
	if r := hp.InvalidOnRecreate; len(r) != 1 || r[0].Name != "w-nocolor" || !slices.Contains(r[0].Errors, "spec.color: Required value") {
		t.Errorf("hop 2's invalid on re-create: %+v, want w-nocolor for spec.color: Required value", r)
	}
	f.wroteNothing(t, before)

	o.AllowDataLoss = true
	rep, err = RunPath(ctx, f.c, o)
	if err != nil {
		t.Fatalf("RunPath with AllowDataLoss: %v", err)
	}
	if !rep.Outcome.Applied || !rep.Outcome.Verified || len(rep.Hops) != 2 || rep.Outcome.ExitCode != 1 ||
		len(rep.Outcome.Remaining) != 1 || !strings.Contains(rep.Outcome.Remaining[0], "default/w-nocolor") {
		t.Errorf("outcome %+v after %d hops, want applied and verified after 2, exit 1, w-nocolor left", rep.Outcome, len(rep.Hops))
	}
	live2 := f.live(t)
	if !slices.Equal(versionNames(live2), []string{"v2"}) || !slices.Equal(live2.Status.StoredVersions, []string{"v2"}) {
		t.Errorf("live: versions %v storedVersions %v, want [v2] and [v2]", versionNames(live2), live2.Status.StoredVersions)
	}

	// The real server, object by object: w-nocolor's update is accepted, its re-create is not.
	got, err := f.res("v2").Get(ctx, "w-nocolor", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(got.Object, "touched", "metadata", "annotations", "crdver.io/test"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.res("v2").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Errorf("an update of w-nocolor at the target: %v, want accepted (plan found no rejected write)", err)
	}
	fresh := &unstructured.Unstructured{Object: map[string]any{"apiVersion": got.GetAPIVersion(), "kind": "Widget",
		"metadata": map[string]any{"name": "w-nocolor-again", "namespace": runNS}, "spec": got.Object["spec"]}}
	if _, err := f.res("v2").Create(ctx, fresh, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil || !strings.Contains(err.Error(), "spec.color: Required value") {
		t.Errorf("a re-create of w-nocolor at the target: %v, want rejected for spec.color: Required value", err)
	}
}
