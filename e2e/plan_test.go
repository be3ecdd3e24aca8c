package e2e

import (
	"os"

	"encoding/json"
	"fmt"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"path/filepath"
	"sigs.k8s.io/yaml"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/plan"
)

// releaseCase is one upgrade of the corpus: Via are releases applied (kubectl apply
// --server-side) after the sample objects were created and before New is planned, for the
// second hop of a two-hop upgrade.
type releaseCase struct {
	name string
	rel  release
	via  []string
	// losesData: objects hold fields the new storage version does not have (Strimzi's v1
	// drops/renames v1beta2 fields): upgrade must refuse before writing unless told
	// --allow-data-loss, and the runbook must not get past its storage switch.
	losesData bool
	// onOlder: the release runs on kube-apiserver 1.34 (olderServer), not the package's.
	onOlder bool
}

// server is the API server the case runs on.
func (rc releaseCase) server(t *testing.T) *testenv.Env {
	if rc.onOlder {
		return olderServer(t)
	}
	return env
}

// The releases of testdata/releases (SOURCES.md says what each covers).
var releaseCases = []releaseCase{
	{name: "strimzi-0.51-to-1.0", losesData: true, rel: release{
		Project: "strimzi", Old: "0.51.0", New: "1.0.0",
		Samples:    []string{"samples/conversion-tool-input/*.yaml", "samples/examples-0.48.0/*.yaml"},
		Controller: "strimzi-cluster-operator", Applier: "argocd-controller", Fix: fixStrimzi,
	}},
	{name: "cert-manager-1.5-to-1.6", rel: release{
		Project: "cert-manager", Old: "v1.5.5", New: "v1.6.3",
		Samples:    []string{"samples/*.yaml"},
		Controller: "cert-manager-certificates-issuing", Applier: "kustomize-controller", WriteMayFail: certManagerWriteMayFail,
	}},
	{name: "cert-manager-1.6-to-1.7", via: []string{"v1.6.3"}, rel: release{
		Project: "cert-manager", Old: "v1.5.5", New: "v1.7.3",
		Samples:    []string{"samples/*.yaml"},
		Controller: "cert-manager-certificates-issuing", Applier: "kustomize-controller", WriteMayFail: certManagerWriteMayFail,
	}},
	// Long histories: cert-manager v0.16.1 (storage v1alpha2) → v1.5.5 (storage v1,
	// storedVersions keeps v1alpha2) → v1.6.3 (v1alpha2..v1beta1 unserved but stored) → v1.7.3
	// (removed).
	{name: "cert-manager-0.16-to-1.6", via: []string{"v1.5.5"}, rel: release{
		Project: "cert-manager", Old: "v0.16.1", New: "v1.6.3",
		Samples:    []string{"samples/*.yaml"},
		Controller: "cert-manager-certificates-issuing", Applier: "kustomize-controller", WriteMayFail: certManager016WriteMayFail,
	}},
	{name: "cert-manager-0.16-to-1.7", via: []string{"v1.5.5", "v1.6.3"}, rel: release{
		Project: "cert-manager", Old: "v0.16.1", New: "v1.7.3",
		Samples:    []string{"samples/*.yaml"},
		Controller: "cert-manager-certificates-issuing", Applier: "kustomize-controller", WriteMayFail: certManager016WriteMayFail,
	}},
	// Gateway API v0.6.2 (ReferenceGrant stored at v1alpha2; no CEL rules) → v1.1.1 (v1
	// storage; ReferenceGrant v1alpha2 unserved, still stored) → v1.2.1 (v1alpha2 removed),
	// with objects v0.6.2 accepted and v1.x rejects (history/).
	{name: "gateway-api-0.6-to-1.1", rel: release{
		Project: "gateway-api", Old: "v0.6.2", New: "v1.1.1",
		Samples:    []string{"samples-v0.6.2/*.yaml", "history/*.yaml"},
		Controller: "gateway-api-controller", Applier: "argocd-controller", Status: gatewayStatus, Fix: fixGateway,
	}},
	{name: "gateway-api-0.6-to-1.2", via: []string{"v1.1.1"}, rel: release{
		Project: "gateway-api", Old: "v0.6.2", New: "v1.2.1",
		Samples:    []string{"samples-v0.6.2/*.yaml", "history/*.yaml"},
		Controller: "gateway-api-controller", Applier: "argocd-controller", Status: gatewayStatus, Fix: fixGateway,
	}},
	{name: "gateway-api-0.5-to-1.0", rel: release{
		Project: "gateway-api", Old: "v0.5.1", New: "v1.0.0",
		Samples:    []string{"samples/*.yaml"},
		Controller: "gateway-api-controller", Applier: "argocd-controller", Status: gatewayStatus,
	}},
	{name: "flux-2.6-to-2.7", rel: release{
		Project: "flux", Old: "source-controller-v1.6.2", New: "source-controller-v1.7.4",
		Samples:    []string{"samples/*.yaml", "history/*.yaml"},
		Controller: "source-controller", Applier: "kustomize-controller", Fix: fixFlux,
	}},
	{name: "external-secrets-0.15-to-0.16", rel: release{
		Project: "external-secrets", Old: "v0.15.1", New: "v0.16.2",
		Samples:    []string{"samples/*.yaml"},
		Controller: "external-secrets", Applier: "argocd-controller",
	}},
	{name: "external-secrets-0.16-to-0.17", via: []string{"v0.16.2"}, rel: release{
		Project: "external-secrets", Old: "v0.15.1", New: "v0.17.0",
		Samples:    []string{"samples/*.yaml"},
		Controller: "external-secrets", Applier: "argocd-controller",
	}},
}

// certManagerWriteMayFail: the test webhook converts by apiVersion only, so a v1alpha2 field
// that v1 spells differently is pruned when stored at v1 and the GitOps apply of the v1alpha2
// manifest is refused (cert-manager's own webhook moves it).
var certManagerWriteMayFail = map[string]string{
	"samples/resource_with_organization_v1alpha2.yaml": "the test webhook only rewrites apiVersion; v1 has no spec.organization (cert-manager's webhook moves it to spec.subject.organizations)",
}

// certManager016WriteMayFail: on v0.16.1 (storage v1alpha2) the test webhook's apiVersion-only
// conversion also keeps v1alpha3's spec.subject.organizations, which v1alpha2 lacks, so the
// GitOps apply of the v1alpha3 file is refused (cert-manager's webhook moves it to
// spec.organization).
var certManager016WriteMayFail = map[string]string{
	"samples/create_cr_v1alpha3_cert_with_ns1.yaml": "the test webhook only rewrites apiVersion; v1alpha2 has no spec.subject.organizations (cert-manager's webhook moves it to spec.organization)",
}

// gatewayStatus is what a Gateway API implementation writes: a route's status names the
// parents it attached to (status.parents is required), a Gateway's its conditions.
func gatewayStatus(o *tracked, cur *unstructured.Unstructured) map[string]any {
	const controller = "example.net/gateway-controller"
	gen := cur.GetGeneration()
	cond := map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "accepted by " + controller,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": gen}
	if o.Kind != "HTTPRoute" {
		return map[string]any{"conditions": []any{cond}}
	}
	refs, _, _ := unstructured.NestedSlice(cur.Object, "spec", "parentRefs")
	parents := []any{}
	for _, r := range refs {
		parents = append(parents, map[string]any{"parentRef": r, "controllerName": controller, "conditions": []any{cond}})
	}
	return map[string]any{"parents": parents}
}

// setUp installs the old release, creates the samples, applies the Via releases and returns
// the CRD names of the old release.
func (h *harness) setUp(via []string) []string {
	h.t.Helper()
	oldDir := h.installOld()
	files, _ := filepath.Glob(filepath.Join(oldDir, "*.yaml"))
	var names []string
	for _, f := range files {
		names = append(names, crdName(h.t, f))
	}
	h.createSamples(names)
	if len(h.rel.ServedAtCreation) > 0 {
		for _, f := range files {
			if err := h.installCRDFile(f); err != nil {
				h.t.Fatalf("applying %s of %s %s: %v", filepath.Base(f), h.rel.Project, h.rel.Old, err)
			}
		}
	}
	for _, v := range via {
		dir := h.releaseDir(v)
		vf, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, f := range vf {
			if err := h.installCRDFile(f); err != nil {
				h.t.Fatalf("applying %s of %s %s: %v", filepath.Base(f), h.rel.Project, v, err)
			}
		}
	}
	return names
}

// TestPlanPredictsRelease runs today's `kubectl crdver plan -f NEW/` against the live old
// release (its own sample objects created by kubectl-create, the operator and a GitOps
// applier), applies NEW/ with `kubectl apply --server-side` CRD by CRD, and checks plan's
// predictions against the API server: the apply verdict and its error, every object's fields
// after the apply (pruned on read, defaulted on read, nothing else changed), the no-op update
// and re-create verdicts, and the managedFields table (versions, managers, object counts; a
// removed version breaks server-side apply and a plain update wipes managedFields; an unserved
// version answers 404).
//
// The releases of different projects run at once (runByProject).
func TestPlanPredictsRelease(t *testing.T) {
	runByProject(t, releaseCases, releaseCase.project, releaseCase.caseName, testPlanPredicts)
}

// project is the testdata/releases folder of the case (cases of one project share CRD names).
func (rc releaseCase) project() string { return rc.rel.Project }

// caseName is the subtest's name.
func (rc releaseCase) caseName() string { return rc.name }

func testPlanPredicts(t *testing.T, rc releaseCase) {
	h := newHarness(t, rc.rel)
	h.setUp(rc.via)
	before := h.snapshot()

	newDir := h.releaseDir(rc.rel.New)
	r := h.crdver("plan", "-f", newDir, "-o", "json")
	if r.code != 0 && r.code != 1 {
		t.Fatalf("plan: exit %d\n%s", r.code, r.stderr)
	}
	var rep plan.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, r.stdout)
	}
	if (r.code == 1) != rep.Breaking() {
		t.Errorf("plan: exit %d but breaking=%v", r.code, rep.Breaking())
	}
	items := map[string]*plan.Item{}
	for i := range rep.Items {
		items[rep.Items[i].CRD] = &rep.Items[i]
	}

	files, _ := filepath.Glob(filepath.Join(newDir, "*.yaml"))
	for _, f := range files {
		name := crdName(t, f)
		it := items[name]
		if it == nil {
			t.Errorf("%s: not in plan's report", name)
			continue
		}
		existed := h.crds[name]
		checkManagedFieldsTable(t, h, before, it)
		if want := map[bool]string{true: plan.OperationUpdate, false: plan.OperationCreate}[existed]; it.Operation != want {
			t.Errorf("%s: plan says %s, the CRD existed=%v", name, it.Operation, existed)
		}
		var liveObjects int
		if existed {
			liveObjects = len(h.objectsOf(name))
			if it.Objects.Total != int64(liveObjects) || it.Objects.Evaluated != int64(liveObjects) {
				t.Errorf("%s: plan evaluated %d of %d objects, %d exist", name, it.Objects.Evaluated, it.Objects.Total, liveObjects)
			}
		}

		applied := h.applyCRDFile(f)
		if (applied.err == nil) != it.Apply.Allowed {
			t.Errorf("%s: plan says apply allowed=%v (%v); kubectl apply --server-side: %v %s", name, it.Apply.Allowed, it.Apply.Errors, applied.err, applied.stderr)
			continue
		}
		for _, e := range it.Apply.Errors {
			// kubectl words the object's name its own way ("The CustomResourceDefinition …"); the
			// API server's reason follows "is invalid: ".
			if _, reason, ok := strings.Cut(e, " is invalid: "); ok {
				e = reason
			}
			if !strings.Contains(applied.stderr, e) {
				t.Errorf("%s: plan's apply error %q is not what the API server said:\n%s", name, e, applied.stderr)
			}
		}
		t.Logf("%s: apply allowed=%v, storage %s→%s, %d objects, %d findings, breaking=%v", name, it.Apply.Allowed,
			it.StorageVersion.Before, it.StorageVersion.After, liveObjects, len(it.Objects.Findings), it.Breaking)
		if !existed {
			continue
		}
		if !it.Apply.Allowed {
			// The apply is refused because storedVersions names a version the release removes.
			// To check what plan says about the objects anyway, the test applies the new CRD
			// with the removed versions kept but not served: objects encoded at them are then
			// read (converted, pruned, defaulted) under the new versions' schemas, which is
			// what plan evaluated. (This is the test's oracle, not advice.)
			kept, ok := h.withRemovedVersionsUnserved(name, f)
			if !ok {
				continue
			}
			if r := h.applyCRDFile(kept); r.err != nil {
				t.Errorf("%s: apply with the removed versions kept unserved: %v %s", name, r.err, r.stderr)
				continue
			}
		}
		checkObjectsAfterApply(t, h, before, it)
		if it.Apply.Allowed {
			// (With the removed versions kept, managedFields at them still convert: there is
			// nothing to check about their removal.)
			checkManagedFieldsAfterApply(t, h, before, it)
		}
	}
}

// withRemovedVersionsUnserved writes the new CRD file with the live CRD's versions it removes
// appended as served: false, storage: false, when every removed version is in storedVersions
// (why the apply is refused); it returns the file and whether it wrote one.
func (h *harness) withRemovedVersionsUnserved(name, newFile string) (string, bool) {
	h.t.Helper()
	next := testenv.ReadCRDs(h.t, newFile)[0]
	live := h.liveCRD(name)
	has := map[string]bool{}
	for _, v := range next.Spec.Versions {
		has[v.Name] = true
	}
	var added []string
	for _, v := range live.Spec.Versions {
		if !has[v.Name] {
			v.Served, v.Storage = false, false
			next.Spec.Versions = append(next.Spec.Versions, v)
			added = append(added, v.Name)
		}
	}
	if len(added) == 0 {
		h.t.Errorf("%s: the apply is refused but the release removes no version", name)
		return "", false
	}
	next.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	next.APIVersion, next.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	b, err := yaml.Marshal(next)
	if err != nil {
		h.t.Fatal(err)
	}
	out := filepath.Join(h.t.TempDir(), filepath.Base(newFile))
	if err := os.WriteFile(out, b, 0o644); err != nil {
		h.t.Fatal(err)
	}
	h.t.Logf("%s: applying the new release with %v kept unserved, to check the per-object predictions", name, added)
	return out, true
}

// checkManagedFieldsTable compares plan's managedFields table with the objects' entries.
func checkManagedFieldsTable(t *testing.T, h *harness, before snapshot, it *plan.Item) {
	t.Helper()
	if !h.crds[it.CRD] {
		return
	}
	group := h.liveCRD(it.CRD).Spec.Group
	want := managersByVersion(before, it.CRD, group)
	got := map[string][]string{}
	for _, mv := range it.ManagedFields {
		got[mv.Version] = mv.Managers
		var n int64
		for o, s := range before {
			if o.CRD != it.CRD {
				continue
			}
			for _, e := range s.Managers {
				if e.APIVersion == group+"/"+mv.Version {
					n++
					break
				}
			}
		}
		if mv.Objects != n {
			t.Errorf("%s: plan counts %d objects with managedFields at %s, there are %d", it.CRD, mv.Objects, mv.Version, n)
		}
	}
	for v, ms := range want {
		names := slices.Sorted(func(yield func(string) bool) {
			for m := range ms {
				if !yield(m) {
					return
				}
			}
		})
		if !slices.Equal(got[v], names) {
			t.Errorf("%s: plan says managers %v wrote %s, the objects say %v", it.CRD, got[v], v, names)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: plan lists managedFields versions %v, the objects name %v", it.CRD, versionsOf(got), versionsOf(want))
	}
}

// checkObjectsAfterApply reads every object after the apply at plan's read version and checks
// plan's finding for it against what the API server returns.
func checkObjectsAfterApply(t *testing.T, h *harness, before snapshot, it *plan.Item) {
	t.Helper()
	findings := map[string]*plan.Finding{}
	for i := range it.Objects.Findings {
		f := &it.Objects.Findings[i]
		findings[f.Namespace+"/"+f.Name] = f
	}
	readVersion := it.Objects.ReadVersion
	for _, o := range h.objectsOf(it.CRD) {
		f := findings[o.Namespace+"/"+o.Name]
		if f == nil {
			f = &plan.Finding{}
		}
		snap := before[o]
		baseline := snap.Data[readVersion]
		if baseline == nil {
			baseline = snap.Data[it.StorageVersion.Before]
		}
		u, err := h.get(o, readVersion)
		if err != nil {
			t.Errorf("%s: reading at %s after the apply: %v", o, readVersion, err)
			continue
		}
		after := cleanObject(u.Object)
		uncertain := len(f.PossiblyPrunedOnRead) > 0 || slices.ContainsFunc(f.Notes, func(n string) bool { return strings.Contains(n, "webhook") })
		ignore := append(append(append([]string{}, f.PrunedOnRead...), f.DefaultedOnRead...), f.PossiblyPrunedOnRead...)
		if uncertain {
			t.Logf("%s: plan is not sure (%v; notes %q); checking only that nothing else changed", o, f.PossiblyPrunedOnRead, f.Notes)
		}
		if lost := lostFields(baseline, after, ignore...); len(lost) > 0 {
			t.Errorf("%s: read at %s after the apply, fields plan did not predict are gone or changed: %v", o, readVersion, lost)
		}
		al := leaves(after)
		for _, p := range f.PrunedOnRead {
			for leaf := range al {
				if under(leaf, p) {
					t.Errorf("%s: plan predicted %s pruned on read; the API server still returns %s", o, p, leaf)
				}
			}
		}
		bl := leaves(baseline)
		for leaf := range al {
			if _, ok := bl[leaf]; !ok && !underAny(leaf, f.DefaultedOnRead) {
				t.Errorf("%s: read at %s after the apply, %s appeared; plan predicted defaults %v", o, readVersion, leaf, f.DefaultedOnRead)
			}
		}
		for _, p := range f.DefaultedOnRead {
			if !slices.ContainsFunc(keysOf(al), func(l string) bool { return under(l, p) }) {
				t.Errorf("%s: plan predicted %s defaulted on read; the API server does not return it", o, p)
			}
		}

		// The controller's next write: the object as read, sent back (dry run).
		_, uerr := h.resource(o, readVersion).Update(h.ctx, u.DeepCopy(), metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Warn"})
		if (uerr != nil) != (len(f.UpdateErrors) > 0) {
			t.Errorf("%s: no-op update after the apply: %v; plan predicted %v", o, uerr, f.UpdateErrors)
		}
		// A re-create of the object as listed before the apply (at the old storage version: a
		// restore of a backup, a GitOps replace) sent at the read version, Strict: the API
		// server answers AlreadyExists only once the object passed validation.
		listed := snap.Data[it.StorageVersion.Before]
		if listed == nil {
			listed = baseline
		}
		re := &unstructured.Unstructured{Object: copyMap(listed)}
		re.SetAPIVersion(o.Group + "/" + readVersion)
		_, cerr := h.resource(o, readVersion).Create(h.ctx, re, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		rejected := cerr != nil && !apierrors.IsAlreadyExists(cerr)
		if rejected != (len(f.CreateErrors) > 0) {
			t.Errorf("%s: re-create after the apply: %v; plan predicted %v", o, cerr, f.CreateErrors)
		}
	}
}

// checkManagedFieldsAfterApply checks what plan's managedFields table says about removed and
// unserved versions: an unserved version answers 404; on an object with entries of a removed
// version, server-side apply fails and a plain update (kubectl label) wipes managedFields
// (kubernetes#111937). The writes come last: they change the objects.
func checkManagedFieldsAfterApply(t *testing.T, h *harness, before snapshot, it *plan.Item) {
	t.Helper()
	crd := h.liveCRD(it.CRD)
	group := crd.Spec.Group
	for _, mv := range it.ManagedFields {
		if !mv.RemovedByThisChange && !mv.UnservedByThisChange {
			continue
		}
		for _, o := range h.objectsOf(it.CRD) {
			if !slices.ContainsFunc(before[o].Managers, func(e managerEntry) bool { return e.APIVersion == group+"/"+mv.Version }) {
				continue
			}
			if mv.UnservedByThisChange {
				if _, err := h.get(o, mv.Version); !apierrors.IsNotFound(err) {
					t.Errorf("%s: plan says %s is no longer served; GET at it: %v", o, mv.Version, err)
				}
				continue
			}
			sv := storageVersion(crd)
			err := h.gitopsApply(o, sv, o.Manifest)
			if err == nil {
				t.Errorf("%s: plan says server-side apply fails (managedFields at removed %s), it succeeded", o, mv.Version)
			} else {
				t.Logf("%s: server-side apply at %s: %v", o, sv, err)
			}
			args := []string{"label", o.Resource + "." + o.Group, o.Name, "e2e.crdver.io/plain-update=1", "--overwrite"}
			if o.Namespace != "" {
				args = append(args, "-n", o.Namespace)
			}
			if r := h.kubectl(args...); r.err != nil {
				t.Errorf("%s: kubectl label: %v %s", o, r.err, r.stderr)
				continue
			}
			u, err := h.get(o, sv)
			if err != nil {
				t.Fatal(err)
			}
			// kube-apiserver 1.36 was seen to wipe managedFields here; 1.37 keeps the old entries
			// and stops recording writers. Either way the plain update's manager is not recorded.
			mgrs := managersOf(u)
			t.Logf("%s: managedFields before %d entries; after kubectl label: %v", o, len(before[o].Managers), mgrs)
			if slices.ContainsFunc(mgrs, func(m string) bool { return strings.HasPrefix(m, "kubectl-label/") }) && len(mgrs) > 1 {
				t.Errorf("%s: plan says managedFields break after a plain update (entries at removed %s); the API server recorded it normally: %v", o, mv.Version, mgrs)
			}
		}
	}
}

func managersOf(u *unstructured.Unstructured) []string {
	var out []string
	for _, mf := range u.GetManagedFields() {
		out = append(out, fmt.Sprintf("%s/%s@%s", mf.Manager, mf.Operation, mf.APIVersion))
	}
	return out
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (h *harness) resource(o *tracked, version string) dynamic.ResourceInterface {
	r := h.dyn.Resource(o.gvr(version))
	if o.Namespace != "" {
		return r.Namespace(o.Namespace)
	}
	return r
}
