package versiondiff

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/util/retry"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/plugin"
	"github.com/crdver/kubectl-crdver/preview"
)

// generatedPerVersion is how many objects convert.Generate makes for each served version of a
// CRD the server installed (a fixed seed: the same objects every run).
const generatedPerVersion = 4

// The checks compared, as the table's columns.
const (
	checkCRD     = "CRD validation"
	checkPreview = "preview"
	checkPlan    = "plan apply"
)

// celWordingChanged is the first minor whose failed-rule errors carry the field's value
// (celValueWording): NewSince of the known difference cel-error-value.
func celWordingChanged(t testing.TB) kubeversion.Version {
	for _, d := range kubeversion.Differences() {
		if d.ID == "cel-error-value" {
			return d.NewSince
		}
	}
	t.Fatal("kubeversion.Differences() has no cel-error-value")
	return kubeversion.Version{}
}

// minorsToRun reads $CRDVER_KUBE_MINORS (see the package doc).
func minorsToRun(t *testing.T) []string {
	spec := os.Getenv("CRDVER_KUBE_MINORS")
	if spec == "" {
		spec = "current," + CIOlderMinor
	}
	var out []string
	seen := map[string]bool{}
	add := func(m string) {
		if m != "" && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	for _, m := range strings.Split(spec, ",") {
		m = strings.TrimSpace(m)
		if m == "all" {
			older, err := testenv.OlderMinors()
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range older {
				add(o)
			}
			add("current")
			continue
		}
		add(m)
	}
	return out
}

// tally counts agreements of one check over one source (probes or corpus).
type tally struct {
	agree, known, total int
}

func (c tally) String() string {
	if c.total == 0 {
		return "–"
	}
	s := fmt.Sprintf("%d of %d", c.agree, c.total)
	if c.known > 0 {
		s += fmt.Sprintf(" (+%d known)", c.known)
	}
	return s
}

// row is one minor's result.
type row struct {
	minor, server string
	counts        map[string]*tally // check + "/" + source
	disagreements []string
}

func (r *row) count(check, source string, agree, known bool) {
	k := check + "/" + source
	if r.counts[k] == nil {
		r.counts[k] = &tally{}
	}
	c := r.counts[k]
	c.total++
	switch {
	case agree:
		c.agree++
	case known:
		c.known++
	}
}

func (r *row) get(check, source string) tally {
	if c := r.counts[check+"/"+source]; c != nil {
		return *c
	}
	return tally{}
}

// TestAgreementWithAPIServers: for every minor chosen (see the package doc), kubectl-crdver
// judging as that minor (--kube-version) says what that minor's real kube-apiserver says, for
// CRD files, previews of objects and plan's apply verdict. A disagreement passes only when
// the offline verdict carries the note of a documented known difference
// (kubeversion.Differences).
func TestAgreementWithAPIServers(t *testing.T) {
	probes := readCRDs(t, filepath.Join(repoRoot(t), "testdata", "kube-versions", "probes.yaml"))
	probeObjects := readObjects(t, filepath.Join(repoRoot(t), "testdata", "kube-versions", "probe-objects.yaml"))
	var corpus []*apiextensionsv1.CustomResourceDefinition
	dir := filepath.Join(repoRoot(t), "..", "shared", "corpus", "crds")
	if files, _ := filepath.Glob(filepath.Join(dir, "*.yaml")); len(files) > 0 {
		for _, f := range files {
			corpus = append(corpus, readCRDs(t, f)...)
		}
	} else {
		t.Logf("no CRD corpus at %s (it lives beside the repository clone): comparing the probes only", dir)
	}
	var rows []*row
	for _, m := range minorsToRun(t) {
		t.Run(m, func(t *testing.T) {
			runMinor(t, m, probes, probeObjects, corpus, &rows)
		})
	}
	table := agreementTable(rows)
	t.Log("\n" + table)
	if out := os.Getenv("CRDVER_AGREEMENT_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// agreementTable is the Markdown table of docs/kubernetes-versions.md.
func agreementTable(rows []*row) string {
	var b strings.Builder
	b.WriteString("| server | CRD validation: probes | CRD validation: corpus | plan apply: probes | plan apply: corpus | preview: probe objects | preview: generated corpus objects |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.server,
			r.get(checkCRD, "probes"), r.get(checkCRD, "corpus"),
			r.get(checkPlan, "probes"), r.get(checkPlan, "corpus"),
			r.get(checkPreview, "probes"), r.get(checkPreview, "corpus"))
	}
	return b.String()
}

// harness compares one minor.
type harness struct {
	t      *testing.T
	ctx    context.Context
	env    *testenv.Env
	srv    *apiServer
	kv     kubeversion.Version
	row    *row
	tmp    string
	nfiles int
	spent  map[string]time.Duration // by phase, logged at the end
}

// timed adds the time since start to phase.
func (h *harness) timed(phase string, start time.Time) { h.spent[phase] += time.Since(start) }

func runMinor(t *testing.T, minor string, probes []*apiextensionsv1.CustomResourceDefinition, probeObjects []map[string]any, corpus []*apiextensionsv1.CustomResourceDefinition, rows *[]*row) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	opts := testenv.Options{}
	if minor != "current" {
		opts.KubeMinor = minor
	}
	env, err := testenv.Start(opts)
	if err != nil {
		t.Fatalf("starting kube-apiserver %s: %v", minor, err)
	}
	defer env.Stop()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := kubeversion.FromInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	want := minor
	if minor == "current" {
		want = kubeversion.Newest.String()
	}
	if kv.String() != want {
		t.Fatalf("the kube-apiserver from %s says it is %s (%s), want %s", env.Assets, kv, info.GitVersion, want)
	}
	srv, err := newAPIServer(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The minor's run: the libraries called here (plan, preview) judge as kv, and so do the
	// commands run in between (versions --kube-version kv), each of which uses kv too.
	release, err := kubeversion.Use(kv)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	h := &harness{t: t, ctx: ctx, env: env, srv: srv, kv: kv, tmp: t.TempDir(), spent: map[string]time.Duration{},
		row: &row{minor: minor, server: moduleVersion(t, minor), counts: map[string]*tally{}}}
	*rows = append(*rows, h.row)
	defer func() {
		for _, d := range h.row.disagreements {
			t.Log(d)
		}
		t.Logf("time spent: %v", h.spent)
	}()
	for _, crd := range probes {
		h.compareCRD(crd, "probes", probeObjects)
	}
	for _, crd := range corpus {
		h.compareCRD(crd, "corpus", nil)
	}
}

// compareCRD compares the verdicts on one CRD, then (if the server installs it) on its objects.
func (h *harness) compareCRD(file *apiextensionsv1.CustomResourceDefinition, source string, given []map[string]any) {
	t := h.t
	crd := testenv.ForServer(file)
	defer h.timed("crd verdicts", time.Now())
	refusal, failure := h.srv.dryRunCreateCRD(h.ctx, crd)
	if failure != nil {
		t.Fatalf("%s: dry-run create on the server: %v", crd.Name, failure)
	}
	serverAllows := refusal == nil

	// (a) the CRD file, as `kubectl crdver versions -f FILE --kube-version MINOR` reads it.
	allowed, msg := h.validateFile(crd)
	h.judge(checkCRD, source, crd.Name+" (create)", allowed, serverAllows, msg, refusal, kubeversion.CheckCRDValidation)

	// (c) plan's offline apply verdict for a create.
	it, err := plan.Plan(h.ctx, nil, crd, nil, plan.Options{KubeVersion: h.kv})
	if err != nil {
		t.Fatalf("%s: plan (create): %v", crd.Name, err)
	}
	h.judge(checkPlan, source, crd.Name+" (create)", it.Apply.Allowed, serverAllows, strings.Join(it.Apply.Errors, "; "), refusal, kubeversion.CheckCRDValidation)

	if source == "probes" {
		// (c) for an update: the probe's rule added to a CRD installed without it.
		h.compareRuleAdded(crd)
	}
	if !serverAllows {
		return
	}
	start := time.Now()
	h.awaitGone(crd.Name)
	live, err := h.env.CreateCRD(h.ctx, crd.DeepCopy())
	h.timed("install", start)
	if err != nil {
		t.Fatalf("%s: the server allowed a dry-run create but not the create: %v", crd.Name, err)
	}
	defer h.deleteLater(crd.Name)
	if source == "corpus" {
		// (c) for an update: the same CRD applied again over the installed one.
		h.compareUpdate(live, crd, source, crd.Name+" (update, unchanged)")
	}
	start = time.Now()
	h.compareObjects(crd, source, given)
	h.timed("objects", start)
}

// compareRuleAdded installs the probe CRD without its x-kubernetes-validations, then compares
// plan's verdict and the server's dry-run update that adds them.
func (h *harness) compareRuleAdded(crd *apiextensionsv1.CustomResourceDefinition) {
	t := h.t
	base := crd.DeepCopy()
	for i := range base.Spec.Versions {
		if s := base.Spec.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
			stripRules(s.OpenAPIV3Schema)
		}
	}
	h.awaitGone(crd.Name)
	live, err := h.env.CreateCRD(h.ctx, base)
	if err != nil {
		t.Fatalf("%s without its rules: %v", crd.Name, err)
	}
	defer h.deleteLater(crd.Name)
	h.compareUpdate(live, crd, "probes", crd.Name+" (update adding the rule)")
}

// deleteLater deletes an installed CRD without waiting until the server has removed it (its
// objects first): the next CRD compared has another name, and one of the same name waits in
// awaitGone.
func (h *harness) deleteLater(name string) {
	defer h.timed("delete", time.Now())
	if err := h.srv.crds.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		h.t.Errorf("deleting %s: %v", name, err)
	}
}

// awaitGone waits until a CRD of that name deleted earlier (deleteLater) is gone; there is
// none, mostly.
func (h *harness) awaitGone(name string) {
	defer h.timed("delete", time.Now())
	if err := h.env.DeleteCRD(h.ctx, name); err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatalf("%s is still there from the last comparison: %v", name, err)
	}
}

func stripRules(s *apiextensionsv1.JSONSchemaProps) {
	s.XValidations = nil
	for k, p := range s.Properties {
		stripRules(&p)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		stripRules(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		stripRules(s.AdditionalProperties.Schema)
	}
}

// compareUpdate compares plan's offline apply verdict for next over live with the server's
// dry-run update.
func (h *harness) compareUpdate(live, next *apiextensionsv1.CustomResourceDefinition, source, what string) {
	t := h.t
	var refusal error
	// The CRD controller updates the status meanwhile: retry with the latest live CRD.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := h.srv.crds.ApiextensionsV1().CustomResourceDefinitions().Get(h.ctx, live.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		live = cur
		var failure error
		refusal, failure = h.srv.dryRunUpdateCRD(h.ctx, live, next)
		return failure
	})
	if err != nil {
		t.Fatalf("%s: dry-run update on the server: %v", what, err)
	}
	it, err := plan.Plan(h.ctx, live, next, nil, plan.Options{KubeVersion: h.kv})
	if err != nil {
		t.Fatalf("%s: plan: %v", what, err)
	}
	h.judge(checkPlan, source, what, it.Apply.Allowed, refusal == nil, strings.Join(it.Apply.Errors, "; "), refusal, kubeversion.CheckCRDValidation)
}

// judge records one CRD verdict comparison.
func (h *harness) judge(check, source, what string, ours, server bool, ourMessage string, refusal error, diffCheck string) {
	if ours == server {
		h.row.count(check, source, true, false)
		return
	}
	serverText := "allows it"
	if refusal != nil {
		serverText = "refuses it: " + refusal.Error()
	}
	oursText := "allowed"
	if !ours {
		oursText = "refused: " + ourMessage
	}
	notes := kubeversion.NotesFor(h.kv, diffCheck, []string{ourMessage, serverText})
	line := fmt.Sprintf("%s %s %s: kubectl-crdver (as %s) %s; the server %s", h.row.server, check, what, h.kv, oursText, serverText)
	h.disagree(check, source, line, notes)
}

func (h *harness) disagree(check, source, line string, notes []string) {
	known := len(notes) > 0
	h.row.count(check, source, false, known)
	if known {
		h.row.disagreements = append(h.row.disagreements, "known difference: "+line+" — "+strings.Join(notes, "; "))
		return
	}
	h.row.disagreements = append(h.row.disagreements, "DISAGREE: "+line)
	h.t.Errorf("%s", line)
}

// validateFile writes crd to a file and runs `kubectl crdver versions -f FILE --kube-version
// MINOR` on it in-process: exit 0 is allowed, exit 2 with "is invalid" refused.
func (h *harness) validateFile(crd *apiextensionsv1.CustomResourceDefinition) (bool, string) {
	t := h.t
	h.nfiles++
	file := filepath.Join(h.tmp, fmt.Sprintf("crd-%d.json", h.nfiles))
	crd = crd.DeepCopy()
	crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	b, err := json.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := plugin.NewRootCmd(streams)
	args := []string{"versions", "-f", file}
	if cmd, _, err := root.Find([]string{"versions"}); err == nil && cmd.Flags().Lookup("kube-version") != nil {
		args = append(args, "--kube-version", h.kv.String())
	} // (else a build without the flag: the loader validates as the process runs, kv: runMinor uses it)
	root.SetArgs(args)
	err = root.ExecuteContext(h.ctx)
	switch code := plugin.ExitCode(err); {
	case code == 0:
		return true, ""
	case code == plugin.ExitUsage && strings.Contains(plugin.ErrorLine(err), " is invalid"):
		return false, plugin.ErrorLine(err)
	default:
		t.Fatalf("versions -f %s --kube-version %s: exit %d: %s\n%s%s", crd.Name, h.kv, code, plugin.ErrorLine(err), out, errOut)
	}
	return false, ""
}

// compareObjects previews objects of every served version (generated ones, and the given
// ones of that version) as the minor and compares each with the server's dry-run create.
func (h *harness) compareObjects(crd *apiextensionsv1.CustomResourceDefinition, source string, given []map[string]any) {
	t := h.t
	p, err := preview.NewPreviewer(crd, preview.WithKubeVersion(h.kv))
	if err != nil {
		t.Fatalf("%s: %v", crd.Name, err)
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		apiVersion := crd.Spec.Group + "/" + v.Name
		var objects []map[string]any
		for _, o := range given {
			if o["apiVersion"] == apiVersion && o["kind"] == crd.Spec.Names.Kind {
				objects = append(objects, o)
			}
		}
		start := time.Now()
		gen, err := convert.GenerateContext(h.ctx, crd, convert.GenerateOptions{Version: v.Name, Count: generatedPerVersion, Seed: 1})
		if err != nil {
			t.Logf("%s %s: no objects generated: %v", crd.Name, v.Name, err)
		} else {
			for _, o := range gen.Objects {
				objects = append(objects, o.Object)
			}
		}
		h.timed("generate", start)
		for _, o := range objects {
			body, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			ns := (&unstructured.Unstructured{Object: o}).GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			pr, err := p.Create(h.ctx, body, preview.PreviewOptions{FieldValidation: preview.FieldValidationStrict})
			if err != nil {
				t.Fatalf("%s %s: preview: %v", crd.Name, v.Name, err)
			}
			sr, err := h.srv.dryRunCreate(h.ctx, crd, v.Name, ns, body, preview.FieldValidationStrict)
			if err != nil {
				t.Fatalf("%s %s: dry-run create: %v", crd.Name, v.Name, err)
			}
			diff, wordingOnly := previewDiff(pr, sr)
			if diff == "" {
				h.row.count(checkPreview, source, true, false)
				continue
			}
			line := fmt.Sprintf("%s preview %s %s %s: preview (as %s) and the server disagree: %s\nobject: %s", h.row.server, crd.Name, v.Name,
				(&unstructured.Unstructured{Object: o}).GetName(), h.kv, diff, body)
			notes := knownNotes(pr.Notes)
			if wordingOnly && !h.kv.AtLeast(celWordingChanged(t)) {
				notes = append(notes, "known difference cel-error-value (wording only): the same verdict and errors, worded as servers before "+celWordingChanged(t).String()+" word them")
			}
			h.disagree(checkPreview, source, line, notes)
		}
	}
}

// knownNotes are the notes of a verdict that name a known difference (kubeversion.Difference.Note).
func knownNotes(notes []string) []string {
	var out []string
	for _, n := range notes {
		if strings.Contains(n, "(known difference ") {
			out = append(out, n)
		}
	}
	return out
}

// moduleVersion is the k8s.io/kubernetes release the minor's kube-apiserver is built from
// (hack/tools/kube or hack/tools/kube-<minor>): builds from the module proxy carry no version
// stamp of their own (gitVersion v0.0.0-master), only the minor.
func moduleVersion(t testing.TB, minor string) string {
	dir := "kube"
	if minor != "current" {
		dir = "kube-" + minor
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "hack", "tools", dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "require" && f[1] == "k8s.io/kubernetes" {
			return strings.TrimPrefix(f[2], "v")
		}
	}
	t.Fatalf("hack/tools/%s/go.mod requires no k8s.io/kubernetes", dir)
	return ""
}

func repoRoot(t testing.TB) string {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// readCRDs is every CRD of a file (a document of comments only is no CRD).
func readCRDs(t testing.TB, path string) []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range testenv.ReadCRDs(t, path) {
		if crd.Name != "" {
			out = append(out, crd)
		}
	}
	return out
}

// readObjects reads every document of a YAML file as an object (a document of comments
// only is none).
func readObjects(t testing.TB, path string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, doc := range testenv.ReadDocuments(t, path) {
		var o map[string]any
		if err := utilyaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}
