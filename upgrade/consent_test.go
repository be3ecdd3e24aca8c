package upgrade

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
)

// cert-manager 1.5 → 1.6 on a cluster whose objects were made under the old schemas: v1alpha2
// (served by 1.5, not by 1.6) does not require spec, v1 does. Objects created at v1alpha2
// without a spec fit 1.5; under 1.6 their next write (at v1, the only version served) is
// rejected with `spec: Required value`. The Issuer's managedFields name v1alpha2, so the
// runbook retires v1alpha2 of issuers (a rewrite); the Certificates have no managedFields
// entry, so no step rewrites them — the case of the Challenges in
// issue 29: the runbook's fix-objects names them and the upgrade must refuse on them too.

const cmNS = "cm-consent"

// certManager is the cert-manager release's CRDs in testdata/releases/cert-manager/<v>, made
// installable on the test server (conversion None: the schemas are what matter here).
func certManager(t *testing.T, v string, names ...string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, n := range names {
		for _, crd := range testenv.ReadCRDs(t, filepath.Join(root, "testdata", "releases", "cert-manager", v, "crd-"+n+".yaml")) {
			out = append(out, testenv.ForServer(crd))
		}
	}
	return out
}

// cmFx is the cert-manager 1.5.5 cluster with the objects above.
type cmFx struct {
	c      *migrate.Clients
	dyn    dynamic.Interface
	next   []*apiextensionsv1.CustomResourceDefinition
	backup string
	cp     string
}

func cmGVR(plural, version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "cert-manager.io", Version: version, Resource: plural}
}

func newCMFx(t *testing.T) *cmFx {
	t.Helper()
	ctx := context.Background()
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // migrate's checkpoints and evidence
	for _, crd := range certManager(t, "v1.5.5", "certificates", "issuers") {
		env.CreateCRDForTest(t, crd)
	}
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &cmFx{c: c, dyn: dynamic.NewForConfigOrDie(env.Config), next: certManager(t, "v1.6.3", "certificates", "issuers"),
		backup: filepath.Join(dir, "backup.yaml"), cp: filepath.Join(dir, "checkpoint.json")}
	if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, cmNS, metav1.GetOptions{}); err != nil {
		ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": cmNS}}
		if _, err := f.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, &unstructured.Unstructured{Object: ns}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(plural, kind, name string, labels map[string]any) {
		meta := map[string]any{"name": name, "namespace": cmNS}
		if labels != nil {
			meta["labels"] = labels
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cert-manager.io/v1alpha2", "kind": kind, "metadata": meta}}
		if _, err := f.dyn.Resource(cmGVR(plural, "v1alpha2")).Namespace(cmNS).Create(ctx, u, metav1.CreateOptions{FieldManager: "cert-manager"}); err != nil {
			t.Fatalf("creating %s %s at v1alpha2 under cert-manager 1.5.5: %v", kind, name, err)
		}
	}
	// The Issuer's label is owned by a managedFields entry of v1alpha2 (retired, so rewritten);
	// the Certificates own no field (no managedFields entry: nothing rewrites them).
	create("issuers", "Issuer", "legacy-issuer", map[string]any{"app": "legacy"})
	create("certificates", "Certificate", "challenge-a", nil)
	create("certificates", "Certificate", "challenge-b", nil)
	return f
}

func (f *cmFx) opts() Options {
	var next []*apiextensionsv1.CustomResourceDefinition
	for _, n := range f.next {
		next = append(next, n.DeepCopy())
	}
	return Options{Next: next, ApplyFile: "cert-manager-v1.6.3/", BackupFile: f.backup, Checkpoint: f.cp}
}

// revision is the last etcd revision of the cert-manager objects.
func (f *cmFx) revision(t *testing.T) int64 {
	t.Helper()
	var rev int64
	for _, p := range []string{"certificates", "issuers"} {
		_, r, err := env.StoredAPIVersions(context.Background(), "cert-manager.io", p)
		if err != nil {
			t.Fatal(err)
		}
		rev = max(rev, r)
	}
	return rev
}

func (f *cmFx) liveCRD(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := f.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// fixObjects are the objects the runbook's fix-objects steps name (namespace/name).
func fixObjects(p *plan.Report) []string {
	var out []string
	for _, s := range p.Runbook {
		if s.Action != plan.ActionFixObjects {
			continue
		}
		for _, o := range s.Objects {
			name, _, _ := strings.Cut(o, ":")
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func findingNames(fs []ObjectFinding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Namespace+"/"+f.Name)
	}
	slices.Sort(out)
	return out
}

// TestRunRefusesEveryRejectedWrite: plan's findings, per object, drive the refusal. Every
// object the runbook's fix-objects steps name is refused before any write unless SkipInvalid
// (the decision table's rejected-write row) — in a CRD the upgrade rewrites or not; and
// AllowDataLoss is no consent to it.
func TestRunRefusesEveryRejectedWrite(t *testing.T) {
	f := newCMFx(t)
	ctx := context.Background()
	rev := f.revision(t)

	rep, err := Run(ctx, f.c, f.opts())
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Run: %v, want ErrRefused", err)
	}
	checkOutcome(t, rep, ResultRefused, 1, false)
	want := []string{cmNS + "/challenge-a", cmNS + "/challenge-b", cmNS + "/legacy-issuer"}
	if got := fixObjects(rep.Plan); !slices.Equal(got, want) {
		t.Fatalf("fixture: the runbook's fix-objects name %v, want %v (runbook %+v)", got, want, rep.Plan.Runbook)
	}
	rewrites := map[string]bool{}
	for _, s := range rep.Plan.Runbook {
		if slices.Contains(rewriteSteps, s.Action) {
			for _, n := range s.CRDs {
				rewrites[n] = true
			}
		}
	}
	if !rewrites["issuers.cert-manager.io"] || rewrites["certificates.cert-manager.io"] {
		t.Fatalf("fixture: the runbook rewrites %v, want issuers only", rewrites)
	}
	if got := findingNames(rep.Preflight.Rejected); !slices.Equal(got, want) {
		t.Errorf("preflight rejected %v, want what the runbook's fix-objects name: %v", got, want)
	}
	if !slices.Contains(rep.Outcome.Refusals, plan.KindRejectedWrite) {
		t.Errorf("refusals %v, want %s", rep.Outcome.Refusals, plan.KindRejectedWrite)
	}

	// The user deletes the Issuer the refusal names; the Certificates stay. --allow-data-loss
	// is no consent to a rejected write: refused, nothing written.
	if err := f.dyn.Resource(cmGVR("issuers", "v1")).Namespace(cmNS).Delete(ctx, "legacy-issuer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rev = f.revision(t)
	o := f.opts()
	o.AllowDataLoss = true
	rep, err = Run(ctx, f.c, o)
	if !errors.Is(err, ErrRefused) {
		states := map[string]string{}
		if rep != nil {
			states = stepStates(rep)
		}
		t.Fatalf("Run with AllowDataLoss and 2 Certificates whose next write is rejected: %v, want ErrRefused (steps %v)", err, states)
	}
	checkOutcome(t, rep, ResultRefused, 1, false)
	if got := findingNames(rep.Preflight.Rejected); !slices.Equal(got, want[:2]) {
		t.Errorf("preflight rejected %v, want %v", got, want[:2])
	}
	if !slices.Equal(rep.Outcome.Refusals, []plan.Kind{plan.KindRejectedWrite}) {
		t.Errorf("refusals %v, want [%s]", rep.Outcome.Refusals, plan.KindRejectedWrite)
	}
	if flags := plan.OverrideFlags(rep.Outcome.Refusals); !slices.Equal(flags, []string{"--" + plan.OverrideSkipInvalid}) {
		t.Errorf("the options that would let it go on: %v, want [--%s]", flags, plan.OverrideSkipInvalid)
	}
	if got := f.revision(t); got != rev {
		t.Errorf("the refused run wrote objects: etcd revision %d, was %d", got, rev)
	}
	for _, crd := range f.next {
		if live := f.liveCRD(t, crd.Name); slices.ContainsFunc(live.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
			return v.Name == "v1alpha2" && !v.Served
		}) {
			t.Errorf("the refused run applied the release: %s's v1alpha2 is not served", crd.Name)
		}
	}

	// With --skip-invalid the user consents: the fix-objects step is skipped as consented,
	// the release applied; the objects stay invalid, which verify reports (exit 1, the
	// decision table's overridden exit).
	o = f.opts()
	o.SkipInvalid = true
	rep, err = Run(ctx, f.c, o)
	if err != nil {
		t.Fatalf("Run with SkipInvalid: %v", err)
	}
	if rep.Outcome.ExitCode != plan.DecisionFor(plan.KindRejectedWrite).UpgradeExitOverridden || !rep.Outcome.Applied {
		t.Errorf("outcome %+v, want applied with exit %d", rep.Outcome, plan.DecisionFor(plan.KindRejectedWrite).UpgradeExitOverridden)
	}
	if s := stepStates(rep)[plan.ActionFixObjects]; s != StateSkipped {
		t.Errorf("fix-objects: %q, want skipped", s)
	}
}

// TestRunNamesInvalidAfterTheConsentedLoss: a release whose new storage version v2 lacks
// spec.legacy and requires spec.size. w-legacy holds only legacy: its next write and its
// re-create as listed (v1 keeps legacy) are accepted, but once the loss is consented to and it
// is rewritten at v2 it is invalid on re-create. The first plan says so before any write — the
// preflight lists it, the runbook's fix-invalid-on-recreate step names it — and the run with
// AllowDataLoss ends as the decision table says for it (applied, verified, left for the user:
// exit 1), with verify's finding marked as reported before the first write.
func TestRunNamesInvalidAfterTheConsentedLoss(t *testing.T) {
	group := "afterloss.run.example.com"
	next := testcrd.New(group, "Widget", testcrd.Version("v1", true, false, widgetSchema(true)), testcrd.Version("v2", true, true, widgetSchema(false)))
	v2 := next.Spec.Versions[1].Schema.OpenAPIV3Schema
	spec := v2.Properties["spec"]
	spec.Required = []string{"size"}
	v2.Properties["spec"] = spec
	f := newRunFx(t, testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(true))), next,
		map[string]map[string]any{"w-legacy": {"legacy": "keep-me"}, "w-sized": {"size": int64(1), "legacy": "x"}, "w-plain": {"size": int64(2)}})
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := context.Background()
	names := func(fs []ObjectFinding) []string {
		var out []string
		for _, x := range fs {
			out = append(out, x.Name)
		}
		slices.Sort(out)
		return out
	}

	rep, err := Run(ctx, f.c, f.opts())
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Run without AllowDataLoss: %v, want ErrRefused", err)
	}
	if got := names(rep.Preflight.DataLoss); !slices.Equal(got, []string{"w-legacy", "w-sized"}) {
		t.Fatalf("fixture: data loss %v, want w-legacy and w-sized", got)
	}
	if got := names(rep.Preflight.InvalidOnRecreate); !slices.Equal(got, []string{"w-legacy"}) {
		t.Errorf("invalid on re-create before any write: %v, want [w-legacy] (judged as it is once the loss is consented to)", got)
	}
	var recreate []string
	for _, s := range rep.Plan.Runbook {
		if s.Action == plan.ActionFixRecreate {
			recreate = append(recreate, s.Objects...)
		}
	}
	if len(recreate) != 1 || !strings.HasPrefix(recreate[0], runNS+"/w-legacy") || !strings.Contains(recreate[0], "spec.size: Required value") {
		t.Errorf("the runbook's fix-invalid-on-recreate names %q, want %s/w-legacy with spec.size: Required value", recreate, runNS)
	}

	o := f.opts()
	o.AllowDataLoss = true
	rep, err = Run(ctx, f.c, o)
	if err != nil {
		t.Fatalf("Run with AllowDataLoss: %v (problems %q)", err, rep.Problems)
	}
	checkOutcome(t, rep, ResultAppliedRemaining, plan.DecisionFor(plan.KindInvalidOnRecreate).UpgradeExit, true)
	if rep.Verify == nil || !slices.Equal(names(rep.Verify.InvalidOnRecreate), []string{"w-legacy"}) {
		t.Fatalf("verify: %+v, want w-legacy invalid on re-create", rep.Verify)
	}
	if !rep.Verify.InvalidOnRecreate[0].ReportedInPreflight {
		t.Errorf("verify finds w-legacy invalid on re-create, which the preflight did not report before the first write")
	}
}
