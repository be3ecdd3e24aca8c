package upgrade

import (
	"context"
	"errors"
	"os"
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

// The tests of Run at its API, on a real kube-apiserver and etcd (one for the package): what
// each kind of release does to the cluster, the report and the outcome (decision table).

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env, testenv.Options{}) }

const runNS = "default"

// widgetSchema is {spec: {size, color[, legacy]}}.
func widgetSchema(legacy bool) *apiextensionsv1.CustomResourceValidation {
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"size": {Type: "integer"}, "color": {Type: "string"},
	}}
	if legacy {
		spec.Properties["legacy"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}}}
}

// runFx is a live CRD with objects, and the files of a run.
type runFx struct {
	group       string
	c           *migrate.Clients
	dyn         dynamic.Interface
	backup, cp  string
	next        *apiextensionsv1.CustomResourceDefinition
	liveVersion string
}

// newRunFx creates live (its storage version is where the objects are written) and the
// objects named in specs; next is the release.
func newRunFx(t *testing.T, live, next *apiextensionsv1.CustomResourceDefinition, specs map[string]map[string]any) *runFx {
	t.Helper()
	ctx := context.Background()
	env.CreateCRDForTest(t, live.DeepCopy())
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &runFx{group: live.Spec.Group, c: c, dyn: dynamic.NewForConfigOrDie(env.Config), backup: filepath.Join(dir, "backup.yaml"), cp: filepath.Join(dir, "checkpoint.json"), next: next}
	for _, v := range live.Spec.Versions {
		if v.Storage {
			f.liveVersion = v.Name
		}
	}
	for name, spec := range specs {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": f.group + "/" + f.liveVersion, "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": runNS}, "spec": spec}}
		if _, err := f.res(f.liveVersion).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *runFx) res(v string) dynamic.ResourceInterface {
	return f.dyn.Resource(schema.GroupVersionResource{Group: f.group, Version: v, Resource: "widgets"}).Namespace(runNS)
}

func (f *runFx) opts() Options {
	return Options{Next: []*apiextensionsv1.CustomResourceDefinition{f.next.DeepCopy()}, ApplyFile: "release/", BackupFile: f.backup, Checkpoint: f.cp}
}

// stored is the objects' count by the apiVersion they are stored at in etcd, and the last
// etcd revision of them or their CRD.
func (f *runFx) stored(t *testing.T) (map[string]int, int64) {
	t.Helper()
	got, rev, err := env.StoredAPIVersions(context.Background(), f.group, "widgets")
	if err != nil {
		t.Fatal(err)
	}
	return got, rev
}

func (f *runFx) live(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := f.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "widgets."+f.group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

func versionNames(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		out = append(out, v.Name)
	}
	return out
}

func stepStates(rep *Report) map[string]string {
	out := map[string]string{}
	for _, s := range rep.Steps {
		out[s.Action] = s.State
	}
	return out
}

func checkOutcome(t *testing.T, rep *Report, result string, code int, applied bool) {
	t.Helper()
	if rep == nil {
		t.Fatalf("no report")
	}
	if o := rep.Outcome; o.Result != result || o.ExitCode != code || o.Applied != applied {
		t.Errorf("outcome %+v, want result %s exit %d applied %v (problems %q)", o, result, code, applied, rep.Problems)
	}
}

// A release that only adds a version: nothing to rewrite, the release is applied (exit 0),
// the objects stay where they are stored.
func TestRunAddsVersion(t *testing.T) {
	group := "adds.run.example.com"
	f := newRunFx(t, testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(false))),
		testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(false)), testcrd.Version("v2", true, false, widgetSchema(false))),
		map[string]map[string]any{"w-a": {"size": int64(1)}, "w-b": {"size": int64(2)}})
	before, _ := f.stored(t)
	rep, err := Run(context.Background(), f.c, f.opts())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOutcome(t, rep, ResultComplete, 0, true)
	if !rep.Outcome.Verified {
		t.Errorf("not verified: %+v", rep.Outcome)
	}
	states := stepStates(rep)
	for _, a := range []string{plan.ActionMigrate, plan.ActionRetire, plan.ActionIntermediate} {
		if _, ok := states[a]; ok {
			t.Errorf("a release adding a version has a %s step: %v", a, states)
		}
	}
	if states[plan.ActionApply] != StateDone {
		t.Errorf("apply: %q, want done (%v)", states[plan.ActionApply], states)
	}
	if got := versionNames(f.live(t)); !slices.Equal(got, []string{"v1", "v2"}) {
		t.Errorf("live versions %v, want [v1 v2]", got)
	}
	if after, _ := f.stored(t); after[group+"/v1"] != 2 || len(after) != len(before) {
		t.Errorf("stored %v, want the 2 objects still at v1 (before %v)", after, before)
	}
}

// A release that moves the storage version and removes the old one: backup, retire (the
// rewrite and the trim), apply; every object is stored at the new version and storedVersions is the new one only.
func TestRunMovesStorage(t *testing.T) {
	group := "moves.run.example.com"
	f := newRunFx(t, testcrd.New(group, "Widget", testcrd.Version("v1beta1", true, true, widgetSchema(false)), testcrd.Version("v1", true, false, widgetSchema(false))),
		testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(false))),
		map[string]map[string]any{"w-a": {"size": int64(1)}, "w-b": {"size": int64(2), "color": "red"}})
	if got, _ := f.stored(t); got[group+"/v1beta1"] != 2 {
		t.Fatalf("fixture: stored %v, want 2 at v1beta1", got)
	}
	rep, err := Run(context.Background(), f.c, f.opts())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOutcome(t, rep, ResultComplete, 0, true)
	states := stepStates(rep)
	for _, a := range []string{plan.ActionBackup, plan.ActionRetire, plan.ActionApply, plan.ActionVerify} {
		if states[a] != StateDone {
			t.Errorf("step %s: %q, want done (%v)", a, states[a], states)
		}
	}
	if got, _ := f.stored(t); got[group+"/v1"] != 2 || len(got) != 1 {
		t.Errorf("stored %v, want both objects at v1", got)
	}
	live := f.live(t)
	if !slices.Equal(live.Status.StoredVersions, []string{"v1"}) || !slices.Equal(versionNames(live), []string{"v1"}) {
		t.Errorf("live: versions %v storedVersions %v, want [v1] and [v1]", versionNames(live), live.Status.StoredVersions)
	}
	if rep.Backup == nil || rep.Backup.File != f.backup {
		t.Fatalf("backup: %+v", rep.Backup)
	}
	b, err := os.ReadFile(f.backup)
	if err != nil || !strings.Contains(string(b), "w-b") || !strings.Contains(string(b), "red") {
		t.Errorf("the backup lacks w-b (%v):\n%s", err, b)
	}
	if rep.Verify == nil || len(rep.Verify.CRDs) != 1 || !rep.Verify.CRDs[0].StoredOK {
		t.Errorf("verify: %+v", rep.Verify)
	}
}

// A release that loses a field: refused before any write without AllowDataLoss (exit 1, no
// backup, nothing in etcd changed); with it, completed, the backup holding the field.
func TestRunDataLoss(t *testing.T) {
	group := "loss.run.example.com"
	f := newRunFx(t, testcrd.New(group, "Widget", testcrd.Version("v1beta1", true, true, widgetSchema(true)), testcrd.Version("v1", true, false, widgetSchema(false))),
		testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(false))),
		map[string]map[string]any{"w-legacy": {"size": int64(1), "legacy": "keep-me"}, "w-plain": {"size": int64(2)}})
	_, revBefore := f.stored(t)

	rep, err := Run(context.Background(), f.c, f.opts())
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Run without AllowDataLoss: %v, want ErrRefused", err)
	}
	checkOutcome(t, rep, ResultRefused, 1, false)
	if !slices.Contains(rep.Outcome.Refusals, plan.KindDataLoss) {
		t.Errorf("refusals %v, want %s", rep.Outcome.Refusals, plan.KindDataLoss)
	}
	if !rep.Preflight.Refused || len(rep.Preflight.DataLoss) != 1 || rep.Preflight.DataLoss[0].Name != "w-legacy" || !slices.Contains(rep.Preflight.DataLoss[0].Fields, "spec.legacy") {
		t.Errorf("preflight: refused %v data loss %+v, want w-legacy losing spec.legacy", rep.Preflight.Refused, rep.Preflight.DataLoss)
	}
	if _, rev := f.stored(t); rev != revBefore {
		t.Errorf("the refused run wrote: etcd revision of the objects and CRD %d, was %d", rev, revBefore)
	}
	if _, err := os.Stat(f.backup); !os.IsNotExist(err) {
		t.Errorf("the refused run wrote a backup (%v)", err)
	}

	o := f.opts()
	o.AllowDataLoss = true
	rep, err = Run(context.Background(), f.c, o)
	if err != nil {
		t.Fatalf("Run with AllowDataLoss: %v", err)
	}
	checkOutcome(t, rep, ResultComplete, 0, true)
	if s := stepStates(rep)[plan.ActionConvertObjects]; s != StateSkipped {
		t.Errorf("convert-objects: %q, want skipped (loss accepted)", s)
	}
	b, err := os.ReadFile(f.backup)
	if err != nil || !strings.Contains(string(b), "legacy: keep-me") {
		t.Errorf("the backup lacks spec.legacy (%v):\n%s", err, b)
	}
	o2, err := f.res("v1").Get(context.Background(), "w-legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(o2.Object, "spec", "legacy"); found {
		t.Errorf("w-legacy still has spec.legacy at v1: %v", o2.Object["spec"])
	}
	if got, _ := f.stored(t); got[group+"/v1"] != 2 || len(got) != 1 {
		t.Errorf("stored %v, want both objects at v1", got)
	}
}

// A dry run plans and preflights only: nothing written to the cluster or to files.
func TestRunDryRun(t *testing.T) {
	group := "dry.run.example.com"
	f := newRunFx(t, testcrd.New(group, "Widget", testcrd.Version("v1beta1", true, true, widgetSchema(false)), testcrd.Version("v1", true, false, widgetSchema(false))),
		testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(false))),
		map[string]map[string]any{"w-a": {"size": int64(1)}})
	_, revBefore := f.stored(t)
	o := f.opts()
	o.DryRun = true
	rep, err := Run(context.Background(), f.c, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOutcome(t, rep, ResultDryRun, 0, false)
	if !rep.DryRun || rep.Plan == nil || len(rep.Plan.Runbook) == 0 {
		t.Errorf("dry run: %v, plan %v", rep.DryRun, rep.Plan)
	}
	if _, rev := f.stored(t); rev != revBefore {
		t.Errorf("the dry run wrote: etcd revision %d, was %d", rev, revBefore)
	}
	for _, p := range []string{f.backup, f.cp} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("the dry run wrote %s (%v)", p, err)
		}
	}
	// With a loss, the dry run says the run would be refused (exit 1), without an error.
	group = "dryloss.run.example.com"
	f = newRunFx(t, testcrd.New(group, "Widget", testcrd.Version("v1beta1", true, true, widgetSchema(true))),
		testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(false))),
		map[string]map[string]any{"w-legacy": {"legacy": "x"}})
	o = f.opts()
	o.DryRun = true
	rep, err = Run(context.Background(), f.c, o)
	if err != nil {
		t.Fatalf("dry run with a loss: %v", err)
	}
	checkOutcome(t, rep, ResultDryRun, 1, false)
	if !rep.Preflight.Refused || !strings.Contains(rep.Outcome.Message, "would be refused") {
		t.Errorf("dry run with a loss: refused %v, message %q", rep.Preflight.Refused, rep.Outcome.Message)
	}
}

// A run cancelled after a step is resumed by running it again: the report says Resumed, the
// first backup is reused and the release completes.
func TestRunResumes(t *testing.T) {
	group := "resume.run.example.com"
	// The live CRD lacks v1: an intermediate CRD adds it before the rewrite.
	f := newRunFx(t, testcrd.New(group, "Widget", testcrd.Version("v1beta1", true, true, widgetSchema(false))),
		testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(false))),
		map[string]map[string]any{"w-a": {"size": int64(1)}, "w-b": {"size": int64(2)}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := f.opts()
	o.Notify = func(s string) {
		if strings.Contains(s, plan.ActionIntermediate+": done") {
			cancel()
		}
	}
	rep, err := Run(ctx, f.c, o)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("interrupted run: %v, want ErrInterrupted", err)
	}
	checkOutcome(t, rep, ResultStopped, 3, false)
	if _, err := os.Stat(f.cp); err != nil {
		t.Fatalf("no checkpoint after the interruption: %v", err)
	}
	first, err := os.ReadFile(f.backup)
	if err != nil {
		t.Fatal(err)
	}
	o.Notify = nil
	rep, err = Run(context.Background(), f.c, o)
	if err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	checkOutcome(t, rep, ResultComplete, 0, true)
	if !rep.Resumed || rep.Backup == nil || !rep.Backup.Reused {
		t.Errorf("resumed %v backup %+v, want a resumed run reusing the backup", rep.Resumed, rep.Backup)
	}
	if again, _ := os.ReadFile(f.backup); string(again) != string(first) {
		t.Errorf("the resumed run rewrote the backup")
	}
	if got, _ := f.stored(t); got[group+"/v1"] != 2 || len(got) != 1 {
		t.Errorf("stored %v, want both objects at v1", got)
	}
	if live := f.live(t); !slices.Equal(live.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions %v, want [v1]", live.Status.StoredVersions)
	}
}

// NoApply stops before the release's apply: the storage steps are done, the outcome is
// not-applied (exit 0) and the live CRD is not the release's.
func TestRunNoApply(t *testing.T) {
	group := "noapply.run.example.com"
	f := newRunFx(t, testcrd.New(group, "Widget", testcrd.Version("v1beta1", true, true, widgetSchema(false)), testcrd.Version("v1", true, false, widgetSchema(false))),
		testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(false)), testcrd.Version("v2", true, false, widgetSchema(false))),
		map[string]map[string]any{"w-a": {"size": int64(1)}})
	o := f.opts()
	o.NoApply = true
	rep, err := Run(context.Background(), f.c, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOutcome(t, rep, ResultNotApplied, 0, false)
	if s := stepStates(rep)[plan.ActionApply]; s != StateSkipped {
		t.Errorf("apply: %q, want skipped", s)
	}
	if got, _ := f.stored(t); got[group+"/v1"] != 1 || len(got) != 1 {
		t.Errorf("stored %v, want the object at v1", got)
	}
	if slices.Contains(versionNames(f.live(t)), "v2") {
		t.Errorf("the release was applied: live versions %v", versionNames(f.live(t)))
	}
}
