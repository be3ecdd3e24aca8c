package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/docblock"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// pathRelease writes a CronTab release (group path.example.com) holding versions (the last is
// the storage version) from testdata/crds/crontab-webhook.yaml: v1beta1 spec.hostPort, v1 and
// v2 (v1's schema) spec.host and spec.port; with wh, conversion by that real HTTPS webhook
// (v1beta1 ↔ v1 converts hostPort, other pairs relabel), else None.
func pathRelease(t *testing.T, dir, name string, wh *testwebhook.Server, versions ...string) string {
	t.Helper()
	crd := testcrd.With(testenv.ForServer(testenv.LoadCRD(t, "crontab-webhook.yaml")), testcrd.Group("path.example.com"),
		testcrd.CopyVersion("v1", "v2"), testcrd.Keep(versions...))
	if wh != nil { // ForServer left conversion None
		crd.Spec.Conversion = wh.WebhookConversion("v1")
	}
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "crontabs.yaml"), testcrd.YAML(t, crd), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPathNeedsIntermediateRelease: objects stored at v1beta1 under release v0.1.0 (None);
// the target v0.3.0 has v1 and v2 (webhook) and no v1beta1, and the live CRD lacks v2, so the
// rewrite would go through v0.3.0's webhook, which does not know v1beta1: only v0.2.0's
// (v1beta1 ↔ v1) converts them. plan names v0.2.0; the API server rejects the target applied
// as is; upgrade refuses before any write without v0.2.0, stops before hop 1 while its
// webhook does not answer, and completes along v0.2.0 → v0.3.0 once it does: objects stored
// at v2 with hostPort converted to host and port, managers kept, storedVersions [v2]. The stop
// before hop 1 is docs/commands/upgrade.md's transcript (the releases and the backup in one
// folder, the page's current folder).
func TestPathNeedsIntermediateRelease(t *testing.T) {
	pages := docblock.OpenTranscripts(t, "docs/commands/upgrade.md")
	h := newHarness(t, release{Project: "path"})
	wh := testwebhook.StartForTest(t, testwebhook.Options{})  // v0.2.0's
	wh2 := testwebhook.StartForTest(t, testwebhook.Options{}) // v0.3.0's
	t.Cleanup(h.deleteCRDs)                                   // before the webhooks stop
	dir := t.TempDir()
	a := pathRelease(t, dir, "v0.1.0", nil, "v1beta1")
	a2 := pathRelease(t, dir, "v0.1.5", nil, "v1beta1")
	b := pathRelease(t, dir, "v0.2.0", wh, "v1beta1", "v1")
	c := pathRelease(t, dir, "v0.3.0", wh2, "v1", "v2")
	const name = "crontabs.path.example.com"
	if r := h.applyCRDFile(filepath.Join(a, "crontabs.yaml")); r.err != nil {
		t.Fatalf("applying v0.1.0: %v\n%s", r.err, r.stderr)
	}
	h.ensureNamespace("path")
	gvr := func(v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "path.example.com", Version: v, Resource: "crontabs"}
	}
	for _, n := range []string{"db", "cache"} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "path.example.com/v1beta1", "kind": "CronTab",
			"metadata": map[string]any{"name": n, "namespace": "path"},
			"spec":     map[string]any{"cronSpec": "*/5 * * * *", "image": n + ":1", "hostPort": n + ".internal:5432"},
		}}
		if _, err := h.dyn.Resource(gvr("v1beta1")).Namespace("path").Create(h.ctx, obj, metav1.CreateOptions{FieldManager: managerCreate}); err != nil {
			t.Fatal(err)
		}
	}
	rv := func() string { return h.liveCRD(name).ResourceVersion }
	before := rv()

	// plan: the direct jump is not reachable, and names the version and the webhook.
	p := h.crdver("plan", "--via", a2, "-f", c, "-o", "json")
	var direct plan.PathReport
	if err := json.Unmarshal([]byte(p.stdout), &direct); err != nil || p.code != 1 || direct.Reachable {
		t.Fatalf("plan --via v0.1.5 -f v0.3.0: exit %d, %v\n%s\n%s", p.code, err, p.stdout, p.stderr)
	}
	if !strings.Contains(direct.Verdict, "v1beta1") || !strings.Contains(direct.Verdict, "does not know") {
		t.Errorf("direct verdict: %s", direct.Verdict)
	}
	t.Logf("direct jump verdict: %s", direct.Verdict)
	// The API server applied as is: the target removes a stored version.
	if r := h.kubectl("apply", "--server-side", "-f", c); r.err == nil || !strings.Contains(r.stderr, "storedVersions") {
		t.Errorf("kubectl apply of v0.3.0 as is: %v\n%s", r.err, r.stderr)
	} else {
		t.Logf("the API server on the direct apply: %s", strings.TrimSpace(r.stderr))
	}

	// plan through the releases: v0.2.0 first (v0.1.5 is skipped).
	p = h.crdver("plan", "--via", a2, "--via", b, "-f", c, "-o", "json")
	var path plan.PathReport
	if err := json.Unmarshal([]byte(p.stdout), &path); err != nil {
		t.Fatalf("plan --via: exit %d, %v\n%s\n%s", p.code, err, p.stdout, p.stderr)
	}
	var hops []string
	for _, hp := range path.Hops {
		hops = append(hops, hp.Release)
	}
	if !path.Reachable || !slices.Equal(hops, []string{"v0.2.0", "v0.3.0"}) || len(path.CRDs) != 1 || !slices.Equal(path.CRDs[0].Via, []string{"v0.2.0"}) {
		t.Fatalf("path: reachable %v, hops %v, crds %+v", path.Reachable, hops, path.CRDs)
	}
	if rw := path.Hops[0].Rewrites; len(rw) != 1 || !rw[0].Checked || !rw[0].Answers || rw[0].To != "v1" {
		t.Errorf("hop 1's rewrite and its webhook: %+v", rw)
	}
	if human := h.crdver("plan", "--via", a2, "--via", b, "-f", c); !strings.Contains(human.stdout, "HOP") || !strings.Contains(human.stdout, "Hop 2: v0.3.0") {
		t.Errorf("plan --via for people:\n%s", human.stdout)
	}

	// --dry-run: the path and hop 1's preflight; nothing written.
	if d := h.crdver("upgrade", "--via", a2, "--via", b, "-f", c, "--dry-run"); d.code != 0 || rv() != before || !strings.Contains(d.stdout, "Dry run: nothing was written") {
		t.Errorf("upgrade --dry-run along the path: exit %d, CRD written %v\n%s\n%s", d.code, rv() != before, d.stdout, d.stderr)
	}
	// upgrade without v0.2.0: refused before any write.
	backup := filepath.Join(dir, "backup.yaml")
	if u := h.crdver("upgrade", "--via", a2, "-f", c, "--yes", "--backup", backup); u.code != 1 || rv() != before {
		t.Fatalf("upgrade without v0.2.0: exit %d, CRD written %v\n%s\n%s", u.code, rv() != before, u.stdout, u.stderr)
	}
	// v0.2.0's webhook does not answer: stopped before hop 1, nothing written.
	wh.Set(testwebhook.Non200)
	args := []string{"upgrade", "--via", a2, "--via", b, "-f", c, "--yes", "--backup", backup}
	u := h.crdver(args...)
	pages.Replace(dir+string(filepath.Separator), "")
	pages.Check(args, u.stdout+u.stderr, u.code)
	if testing.Verbose() {
		t.Logf("plan --via (for people):\n%s\nupgrade, webhook down:\n%s%s", h.crdver("plan", "--via", a2, "--via", b, "-f", c).stdout, u.stdout, u.stderr)
	}
	if u.code != 1 || !strings.Contains(u.stderr, "before hop 1 (v0.2.0)") || rv() != before {
		t.Fatalf("upgrade with v0.2.0's webhook down: exit %d, CRD written %v\n%s\n%s", u.code, rv() != before, u.stdout, u.stderr)
	}
	// Once it answers, the same command takes hop 1 and stops before hop 2, whose webhook
	// (v0.3.0's) does not answer; then, once it does, resumes at hop 2.
	wh.Set(testwebhook.Good)
	wh2.Set(testwebhook.Non200)
	start := time.Now()
	u = h.crdver("upgrade", "--via", a2, "--via", b, "-f", c, "--yes", "--backup", backup)
	if u.code != 1 || !strings.Contains(u.stderr, "before hop 2 (v0.3.0)") || storageVersion(h.liveCRD(name)) != "v1" {
		t.Fatalf("upgrade with v0.3.0's webhook down: exit %d, storage %s\n%s\n%s", u.code, storageVersion(h.liveCRD(name)), u.stdout, u.stderr)
	}
	// upgrade status along the path: the hops, hop 2 of 2 waiting for its webhook, hop 2's
	// release as the cluster has it, and the command that continues.
	st := h.crdver("upgrade", "status", "--via", a2, "--via", b, "-f", c)
	t.Logf("upgrade status along the path, stopped before hop 2:\n%s%s", st.stdout, st.stderr)
	flat := strings.Join(strings.Fields(st.stdout), " ")
	for _, want := range []string{"path: v0.2.0 → v0.3.0", "hop: 2 of 2, v0.3.0", "waiting: before hop 2 (v0.3.0)",
		"next: run the same command again to continue", "kubectl crdver upgrade -f " + c + " --via " + a2 + " --via " + b + " --backup " + backup + " --yes", "backup: " + backup} {
		if !strings.Contains(flat, want) {
			t.Errorf("upgrade status along the path does not say %q:\n%s", want, st.stdout)
		}
	}
	if st.code != 1 {
		t.Errorf("upgrade status of a path stopped before hop 2: exit %d, want 1\n%s", st.code, st.stderr)
	}
	wh2.Set(testwebhook.Good)
	u = h.crdver("upgrade", "--via", a2, "--via", b, "-f", c, "--yes", "--backup", backup, "-o", "json")
	took := time.Since(start)
	var rep upgrade.PathReport
	if err := json.Unmarshal([]byte(u.stdout), &rep); err != nil || u.code != 0 {
		t.Fatalf("upgrade along the path: exit %d, %v\n%s\n%s", u.code, err, u.stdout, u.stderr)
	}
	t.Logf("upgrade along the path (2 hops, stopped once before hop 2): %s", took.Round(time.Millisecond))
	if !rep.Resumed || rep.StartHop != 2 || len(rep.Hops) != 1 || !rep.Outcome.Applied || !rep.Outcome.Verified {
		t.Fatalf("resumed path: resumed %v at hop %d, %d hops run, outcome %+v", rep.Resumed, rep.StartHop, len(rep.Hops), rep.Outcome)
	}
	// One backup (hop 1's, kept in the path's state) and one verify (hop 2's).
	for _, s := range rep.Hops[0].Steps {
		if s.Action == plan.ActionBackup && (s.State != upgrade.StateAlready || !strings.Contains(s.Detail, backup)) {
			t.Errorf("hop 2's backup step: %s (%s)", s.State, s.Detail)
		}
	}
	if rep.Hops[0].Hop == nil || rep.Hops[0].Hop.Index != 2 || rep.Hops[0].Verify == nil {
		t.Errorf("hop 2: %+v, verify %v", rep.Hops[0].Hop, rep.Hops[0].Verify)
	}
	crd := h.liveCRD(name)
	if !slices.Equal(crd.Status.StoredVersions, []string{"v2"}) || storageVersion(crd) != "v2" || crdinfo.Has(crd, "v1beta1") {
		t.Errorf("CRD after the path: storage %s, storedVersions %v, versions %v", storageVersion(crd), crd.Status.StoredVersions, servedVersions(crd))
	}
	for _, n := range []string{"db", "cache"} {
		got, err := h.dyn.Resource(gvr("v2")).Namespace("path").Get(h.ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		host, _, _ := unstructured.NestedString(got.Object, "spec", "host")
		port, _, _ := unstructured.NestedString(got.Object, "spec", "port")
		if host != n+".internal" || port != "5432" {
			t.Errorf("%s: spec.host %q port %q after the path (was hostPort %s.internal:5432)", n, host, port, n)
		}
		if !slices.ContainsFunc(got.GetManagedFields(), func(m metav1.ManagedFieldsEntry) bool { return m.Manager == managerCreate }) {
			t.Errorf("%s: manager %s lost", n, managerCreate)
		}
		stored, _, err := env.StoredObject(h.ctx, "path.example.com", "crontabs", "path", n)
		if err != nil || stored["apiVersion"] != "path.example.com/v2" {
			t.Errorf("%s: stored in etcd as %v (%v)", n, stored["apiVersion"], err)
		}
	}
	if testing.Verbose() {
		t.Logf("upgrade, hop 2's webhook down: %s", u.stderr)
		for _, hr := range rep.Hops {
			for _, s := range hr.Steps {
				t.Logf("hop %d/%d %s: %s %v: %s (%s)", hr.Hop.Index, hr.Hop.Of, hr.Hop.Release, s.Action, s.CRDs, s.State, s.Detail)
			}
		}
		t.Logf("outcome: %+v", rep.Outcome)
	}
	// Run again: the path is complete; nothing is written.
	after := rv()
	if u := h.crdver("upgrade", "--via", a2, "--via", b, "-f", c, "--yes", "--backup", backup+".2"); u.code != 0 || rv() != after {
		t.Errorf("upgrade along the path again: exit %d, CRD written %v\n%s\n%s", u.code, rv() != after, u.stdout, u.stderr)
	}
	if st := h.crdver("upgrade", "status", "--via", a2, "--via", b, "-f", c); st.code != 0 || !strings.Contains(st.stdout, "hop: every hop applied") {
		t.Errorf("upgrade status of the finished path: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
}

// pathChains are real release chains of testdata/releases, cluster at the oldest.
var pathChains = []struct {
	name string
	via  []string
	rel  release
	// webhook starts the project's own conversion webhook (before newHarness moves HOME): the
	// release files point at it in place of the stand-in, and the path must end applied and
	// verified.
	webhook func(t *testing.T) *testenv.CertManagerWebhook
}{
	{name: "gateway-api-0.5-to-1.2", via: []string{"v0.6.2", "v1.0.0", "v1.1.1"}, rel: release{
		Project: "gateway-api", Old: "v0.5.1", New: "v1.2.1", Samples: []string{"samples/*.yaml"},
		Controller: "gateway-api-controller", Applier: "argocd-controller", Status: gatewayStatus,
	}},
	// cert-manager's own webhook (v1.6.3: the last release that converts v1alpha2, v1alpha3
	// and v1beta1) converts along the whole path; every sample is written at its version.
	{name: "cert-manager-0.16-to-1.7", via: []string{"v1.5.5", "v1.6.3"}, rel: release{
		Project: "cert-manager", Old: "v0.16.1", New: "v1.7.3", Samples: []string{"samples/*.yaml"},
		Controller: "cert-manager-certificates-issuing", Applier: "kustomize-controller",
	}, webhook: func(t *testing.T) *testenv.CertManagerWebhook {
		return testenv.StartCertManagerWebhook(t, "v1.6.3", env.Kubeconfig)
	}},
	{name: "external-secrets-0.15-to-0.17", via: []string{"v0.16.2"}, rel: release{
		Project: "external-secrets", Old: "v0.15.1", New: "v0.17.0", Samples: []string{"samples/*.yaml"},
		Controller: "external-secrets", Applier: "argocd-controller",
	}},
}

// TestPathRealChains: on each real chain, plan's verdict on the direct jump against what the
// API server does with the newest release applied as is, the path plan computes through the
// releases between, and upgrade along it: applied and verified, every field and manager kept,
// status.storedVersions the storage version alone (or, where the stand-in webhook cannot
// convert what the project's own would, refused before any write, listing the objects).
//
// cert-manager runs with its own webhook (v1.6.3's, for every release: v0.16.1's CRDs are
// given conversionReviewVersions [v1], which that webhook answers, in place of [v1beta1],
// which v0.16.1's own webhook answered). The path needs no consent: nothing is lost (the empty
// spec.subject cert-manager's round trip adds to a Certificate with spec.organization is an
// addition; v1alpha2 of the CertificateRequest CRD, stored but with no object, is read while
// it is still served). It ends applied and verified (exit 0), every object holding at v1 what
// cert-manager's webhook makes of what it held before, every manager kept; and the way back to
// v0.16.1, without consent too (spec.subject.organizations, which v1alpha2's schema prunes, is
// held there as spec.organization: the round trip loses nothing), ends with every object
// holding at v1alpha2 every field it held before.
// CRDVER_PATH_TIMING=1 also takes the same cluster one release at a time by hand, for the
// timing figure.
func TestPathRealChains(t *testing.T) {
	for _, ch := range pathChains {
		t.Run(ch.name, func(t *testing.T) {
			var hook *testenv.CertManagerWebhook
			if ch.webhook != nil {
				hook = ch.webhook(t)
			}
			h := newHarness(t, ch.rel)
			if hook != nil {
				h.useWebhook(hook.URL, hook.CABundle)
				h.hookV1Only = true
			}
			names := h.setUp(nil)
			before := h.snapshot()
			newDir := h.releaseDir(ch.rel.New)
			var via []string
			for _, v := range ch.via {
				via = append(via, "--via", h.releaseDir(v))
			}
			// The direct jump, judged by plan, and applied as is.
			d := h.crdver("plan", "--via", h.releaseDir(ch.rel.Old), "-f", newDir, "-o", "json")
			var direct plan.PathReport
			if err := json.Unmarshal([]byte(d.stdout), &direct); err != nil {
				t.Fatalf("plan -f %s: exit %d %v\n%s", ch.rel.New, d.code, err, d.stderr)
			}
			t.Logf("direct jump %s → %s: plan: %s (exit %d)", ch.rel.Old, ch.rel.New, direct.Verdict, d.code)
			rejected := 0
			files, _ := filepath.Glob(filepath.Join(newDir, "*.yaml"))
			for _, f := range files {
				r := h.kubectl("apply", "--server-side", "--dry-run=server", "-f", f)
				if r.err != nil {
					rejected++
					t.Logf("the API server on %s as is: %s", filepath.Base(f), firstLineOf(r.stderr))
				}
			}
			if direct.Direct == (rejected > 0) && !direct.Direct {
				t.Logf("plan says the direct jump needs a hop; the API server rejects %d of %d CRDs applied as is", rejected, len(files))
			}
			// The path.
			p := h.crdver(append(append([]string{"plan"}, via...), "-f", newDir, "-o", "json")...)
			var path plan.PathReport
			if err := json.Unmarshal([]byte(p.stdout), &path); err != nil || !path.Reachable {
				t.Fatalf("plan --via: exit %d %v\n%s\n%s", p.code, err, p.stdout, p.stderr)
			}
			var hops []string
			for _, hp := range path.Hops {
				hops = append(hops, hp.Release)
			}
			t.Logf("path: %v (%s)", hops, path.Verdict)
			if hops[len(hops)-1] != ch.rel.New {
				t.Errorf("the path does not end at %s: %v", ch.rel.New, hops)
			}
			backup := filepath.Join(t.TempDir(), "backup.yaml")
			start := time.Now()
			u := h.crdver(append(append([]string{"upgrade"}, via...), "-f", newDir, "--yes", "--backup", backup, "-o", "json")...)
			took := time.Since(start)
			var rep upgrade.PathReport
			if err := json.Unmarshal([]byte(u.stdout), &rep); err != nil {
				t.Fatalf("upgrade --via: exit %d %v\n%s", u.code, err, u.stderr)
			}
			t.Logf("upgrade along the path: exit %d in %s, %d hop(s) run: %s", u.code, took.Round(time.Millisecond), len(rep.Hops), rep.Outcome.Message)
			if ch.webhook != nil && (u.code != 0 || !rep.Outcome.Applied || !rep.Outcome.Verified) {
				for _, hr := range rep.Hops {
					pf, _ := json.Marshal(hr.Preflight)
					t.Logf("hop %+v: preflight %s", hr.Hop, pf)
				}
				t.Fatalf("upgrade along the path with %s's own webhook: exit %d, outcome %+v\n%s", ch.rel.Project, u.code, rep.Outcome, u.stderr)
			}
			if u.code == 1 && rep.StoppedBefore > 0 && len(rep.Hops) == 0 {
				// The harness's stand-in webhook (identity: apiVersion only) answers, but its
				// conversion fails convert's checks where the project's own webhook converts:
				// the path stops before that hop, nothing written.
				now := h.snapshot()
				for o, b := range before {
					if a := now[o]; a == nil || a.Stored != b.Stored {
						t.Errorf("%s: written before the hop a person must prepare", o)
					}
				}
				t.Logf("stopped before hop %d: %s", rep.StoppedBefore, firstLineOf(u.stderr))
				return
			}
			if u.code == 1 && rep.Outcome.Result == upgrade.ResultRefused && len(rep.Hops) == 0 {
				// The path's preflight (every hop, before any write) refused.
				now := h.snapshot()
				for o, b := range before {
					if a := now[o]; a == nil || a.Stored != b.Stored {
						t.Errorf("%s: written by a refused path", o)
					}
				}
				t.Logf("the path's preflight refused before any write: %s", firstLineOf(u.stderr))
				return
			}
			if u.code != 0 {
				last := rep.Hops[len(rep.Hops)-1]
				if u.code != 1 || len(rep.Hops) != 1 || !last.Preflight.Refused || len(last.Preflight.DataLoss) == 0 {
					t.Fatalf("upgrade --via: exit %d, not a refusal for data loss before any write\n%s", u.code, u.stderr)
				}
				now := h.snapshot()
				for o, b := range before {
					if a := now[o]; a == nil || a.Stored != b.Stored {
						t.Errorf("%s: written by a refused upgrade", o)
					}
				}
				t.Logf("refused before any write: %d objects would lose fields through the stand-in identity webhook (%v ...)", len(last.Preflight.DataLoss), last.Preflight.DataLoss[0].Fields)
				return
			}
			after := h.snapshot()
			fields, byVersion := 0, map[string]int{}
			defer func() {
				t.Logf("after the path: %d objects (created at %v), %d fields compared", len(before), byVersion, fields)
			}()
			for o, b := range before {
				a := after[o]
				if a == nil {
					t.Errorf("%s: gone after the path", o)
					continue
				}
				bv, av := versionOf(b.StoredAPIVersion), versionOf(a.StoredAPIVersion)
				if av != storageVersion(h.liveCRD(o.CRD)) {
					t.Errorf("%s: stored at %s after the path", o, a.StoredAPIVersion)
				}
				want := b.Data[bv]
				if hook != nil {
					// A project's own conversion moves fields between versions (cert-manager's
					// v1alpha2 spec.organization is v1's spec.subject.organizations): what the
					// object must hold now is what that webhook makes of it at av.
					in := copyMap(want)
					in["apiVersion"] = o.Group + "/" + bv
					in["kind"] = o.Kind
					conv, err := hook.Convert(o.Group+"/"+av, in)
					if err != nil || len(conv) != 1 {
						t.Fatalf("%s: converting what it was (%s) to %s through the webhook: %v", o, bv, av, err)
					}
					want = cleanObject(conv[0])
				}
				fields += len(leaves(want))
				byVersion[o.Version]++
				if lost := lostFields(want, a.Data[av], "apiVersion", "metadata"); len(lost) > 0 {
					t.Errorf("%s: lost %v", o, lost)
				}
				if lost := lostManagers(b.Managers, a.Managers); len(lost) > 0 {
					t.Errorf("%s: lost managers %v", o, lost)
				}
			}
			for _, n := range names {
				crd := h.liveCRD(n)
				if !slices.Equal(crd.Status.StoredVersions, []string{storageVersion(crd)}) {
					t.Errorf("%s: storedVersions %v", n, crd.Status.StoredVersions)
				}
			}
			if !rep.Outcome.Applied || !rep.Outcome.Verified {
				t.Errorf("outcome %+v", rep.Outcome)
			}
			// And back to the oldest release, as upgrade takes any release.
			back := h.crdver("upgrade", "-f", h.releaseDir(ch.rel.Old), "--yes", "--backup", filepath.Join(t.TempDir(), "back.yaml"))
			t.Logf("upgrade -f %s back: exit %d: %s", ch.rel.Old, back.code, firstLineOf(back.stderr))
			if back.code != 0 && back.code != 1 {
				t.Errorf("upgrade -f %s back: exit %d\n%s", ch.rel.Old, back.code, back.stderr)
			}
			if hook != nil {
				// With the project's own webhook the way back ends too, with no consent: the
				// oldest release's storage again, and every object, read at the version it was
				// stored at before, holding every field it held then.
				if back.code != 0 {
					t.Fatalf("upgrade -f %s back: exit %d\n%s\n%s", ch.rel.Old, back.code, back.stdout, back.stderr)
				}
				back := h.snapshot()
				for o, b := range before {
					bv := versionOf(b.StoredAPIVersion)
					a := back[o]
					if a == nil || versionOf(a.StoredAPIVersion) != bv {
						t.Errorf("%s: not stored at %s after the way back", o, bv)
						continue
					}
					if lost := lostFields(b.Data[bv], a.Data[bv], "apiVersion", "metadata"); len(lost) > 0 {
						t.Errorf("%s: lost %v on the way there and back", o, lost)
					}
					if lost := lostManagers(b.Managers, a.Managers); len(lost) > 0 {
						t.Errorf("%s: lost managers %v on the way there and back", o, lost)
					}
				}
				for _, n := range names {
					crd := h.liveCRD(n)
					if want := storageVersion(crd); !slices.Equal(crd.Status.StoredVersions, []string{want}) {
						t.Errorf("%s after the way back: storedVersions %v, storage %s", n, crd.Status.StoredVersions, want)
					}
				}
			}
			if os.Getenv("CRDVER_PATH_TIMING") == "" {
				return
			}
			// The same from the oldest release, one release at a time by hand.
			h.deleteCRDs()
			h.setUp(nil)
			start = time.Now()
			for _, v := range append(append([]string{}, ch.via...), ch.rel.New) {
				if r := h.crdver("upgrade", "-f", h.releaseDir(v), "--yes", "--backup", filepath.Join(t.TempDir(), v+".yaml")); r.code != 0 {
					t.Logf("upgrade -f %s: exit %d: %s", v, r.code, firstLineOf(r.stderr))
				}
			}
			t.Logf("one release at a time: %s; along the path: %s (ratio %.2f)", time.Since(start).Round(time.Millisecond), took.Round(time.Millisecond), float64(took)/float64(time.Since(start)))
		})
	}
}

func firstLineOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
