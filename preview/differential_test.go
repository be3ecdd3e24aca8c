package preview

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// warningCollector gathers the warnings of the API server's responses.
type warningCollector struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningCollector) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}

// server talks to the test API server with raw requests, so that the bytes preview sees are
// the bytes the server sees (duplicate fields included).
type server struct {
	rc       rest.Interface
	warnings *warningCollector
}

func newServer(t testing.TB) *server {
	cfg := rest.CopyConfig(env.Config)
	wc := &warningCollector{}
	cfg.WarningHandler = wc
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &server{rc: cs.Discovery().RESTClient(), warnings: wc}
}

// serverResult is the server's answer, shaped like a preview's.
type serverResult struct {
	verdict  string
	object   map[string]any
	warnings []string
	errors   []PreviewError
}

func resourcePath(crd *apiextensionsv1.CustomResourceDefinition, version, namespace string) string {
	parts := []string{"/apis", crd.Spec.Group, version}
	if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
		parts = append(parts, "namespaces", namespace)
	}
	return strings.Join(append(parts, crd.Spec.Names.Plural), "/")
}

func (s *server) do(ctx context.Context, req *rest.Request) (*serverResult, error) {
	s.warnings.take()
	body, err := req.Do(ctx).Raw()
	r := &serverResult{warnings: s.warnings.take()}
	if err != nil {
		// Decode the Status ourselves: this client's decoder does not know the CRD's group.
		var st metav1.Status
		if jerr := json.Unmarshal(body, &st); jerr != nil || st.Kind != "Status" {
			var se apierrors.APIStatus
			if !errors.As(err, &se) {
				return nil, err
			}
			st = se.Status()
		}
		if st.Code >= 500 || st.Code == 0 {
			return nil, fmt.Errorf("server error: %w: %s", err, body)
		}
		r.verdict = Rejected
		if st.Details != nil && len(st.Details.Causes) > 0 {
			for _, c := range st.Details.Causes {
				r.errors = append(r.errors, PreviewError{Field: c.Field, Type: string(c.Type), Message: c.Message})
			}
		} else {
			r.errors = append(r.errors, PreviewError{Type: string(st.Reason), Message: st.Message})
		}
		return r, nil
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(body); err != nil {
		return nil, err
	}
	r.verdict, r.object = Accepted, u.Object
	return r, nil
}

// dryRunCreate is `kubectl create --dry-run=server` with the given fieldValidation.
func (s *server) dryRunCreate(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, version, ns string, body []byte, fv FieldValidation) (*serverResult, error) {
	return s.do(ctx, s.rc.Post().AbsPath(resourcePath(crd, version, ns)).Param("dryRun", "All").Param("fieldValidation", string(fv)).
		SetHeader("Content-Type", "application/json").Body(body))
}

// comparable strips what only the server sets (uid, timestamps, managedFields, resourceVersion,
// generation) or what preview deliberately leaves out.
func comparable(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	c := runtimeDeepCopy(obj)
	for _, f := range []string{"uid", "creationTimestamp", "managedFields", "resourceVersion", "generation"} {
		unstructured.RemoveNestedField(c, "metadata", f)
	}
	return c
}

func runtimeDeepCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	u := &unstructured.Unstructured{}
	_ = u.UnmarshalJSON(b)
	return u.Object
}

func sortErrors(errs []PreviewError) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Message))
	}
	sort.Strings(out)
	return out
}

// compare returns "" when preview and server agree, else what differs.
func compare(p *PreviewResult, s *serverResult) string {
	var diffs []string
	if p.Verdict != s.verdict {
		diffs = append(diffs, fmt.Sprintf("verdict: preview %s, server %s (preview errors %v, server errors %v)", p.Verdict, s.verdict, p.Errors, s.errors))
	}
	if d := cmp.Diff(sortedCopy(s.warnings), sortedCopy(p.Warnings)); d != "" {
		diffs = append(diffs, "warnings (-server +preview):\n"+d)
	}
	if p.Verdict == s.verdict && p.Verdict == Rejected {
		if d := cmp.Diff(sortErrors(s.errors), sortErrors(p.Errors)); d != "" {
			diffs = append(diffs, "errors (-server +preview):\n"+d)
		}
	}
	if p.Verdict == s.verdict && p.Verdict == Accepted {
		if d := cmp.Diff(comparable(s.object), comparable(p.Object)); d != "" {
			diffs = append(diffs, "object (-server +preview):\n"+d)
		}
	}
	return strings.Join(diffs, "\n")
}

// readCRDFile decodes every CRD of a file.
func readCRDFile(t testing.TB, path string) []*apiextensionsv1.CustomResourceDefinition {
	return testenv.ReadCRDs(t, path)
}

// forServer: see testenv.ForServer. Preview gets the same CRD.
func forServer(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	return testenv.ForServer(crd)
}

// corpusDir is ../shared/corpus/crds beside the repository clone.
func corpusDir() (string, bool) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", false
	}
	dir := filepath.Join(root, "..", "shared", "corpus", "crds")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return dir, false
	}
	return dir, true
}

type differential struct {
	t       *testing.T
	srv     *server
	agree   int
	total   int
	byMode  map[FieldValidation]int
	verdict map[string]int
}

// runCRD installs crd, and for every served version with a structural schema sends n random
// objects through preview and through server-side dry-run create, in each fieldValidation mode.
func (d *differential) runCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, n int, seed int64) {
	t := d.t
	crd = forServer(crd)
	if _, err := env.CreateCRD(ctx, crd.DeepCopy()); err != nil {
		t.Fatalf("installing %s: %v", crd.Name, err)
	}
	defer func() {
		if err := env.DeleteCRD(context.Background(), crd.Name); err != nil {
			t.Errorf("deleting %s: %v", crd.Name, err)
		}
	}()
	p, err := NewPreviewer(crd)
	if err != nil {
		t.Fatalf("%s: %v", crd.Name, err)
	}
	r := rand.New(rand.NewSource(seed))
	for _, ver := range crd.Spec.Versions {
		if !ver.Served {
			continue
		}
		s, err := p.usable(ver.Name)
		if err != nil {
			t.Logf("%s %s: skipped: %v", crd.Name, ver.Name, err)
			continue
		}
		gen := &objectGenerator{r: r, mutate: 0.08}
		for i := 0; i < n; i++ {
			if i%3 == 0 {
				gen.mutate = 0 // a third of the objects without deliberate mutations
			} else {
				gen.mutate = 0.08
			}
			ns := ""
			if crd.Spec.Scope == apiextensionsv1.NamespaceScoped && r.Intn(4) > 0 {
				ns = "default"
			} else if crd.Spec.Scope == apiextensionsv1.ClusterScoped && r.Intn(8) == 0 {
				ns = "default" // the API server clears it
			}
			obj := gen.generate(s, crd.Spec.Group+"/"+ver.Name, crd.Spec.Names.Kind, fmt.Sprintf("obj-%d", i), ns)
			body, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			if r.Intn(20) == 0 {
				// a duplicate field: only the strict decoder notices
				body = append([]byte(`{"kind":"`+crd.Spec.Names.Kind+`",`), body[1:]...)
			}
			for _, fv := range []FieldValidation{FieldValidationWarn, FieldValidationStrict, FieldValidationIgnore} {
				pr, err := p.Create(ctx, body, PreviewOptions{FieldValidation: fv})
				if err != nil {
					t.Errorf("%s %s object %d (%s): preview failed: %v\n%s", crd.Name, ver.Name, i, fv, err, body)
					continue
				}
				sr, err := d.srv.dryRunCreate(ctx, crd, ver.Name, "default", body, fv)
				if err != nil {
					t.Fatalf("%s: dry-run: %v", crd.Name, err)
				}
				d.total++
				d.verdict[sr.verdict]++
				if diff := compare(pr, sr); diff != "" {
					t.Errorf("%s %s object %d fieldValidation=%s: preview and API server disagree:\n%s\nobject: %s", crd.Name, ver.Name, i, fv, diff, body)
					continue
				}
				d.agree++
				d.byMode[fv]++
			}
		}
	}
}

func newDifferential(t *testing.T) *differential {
	return &differential{t: t, srv: newServer(t), byMode: map[FieldValidation]int{}, verdict: map[string]int{}}
}

func (d *differential) report(what string) {
	d.t.Logf("%s: preview agreed with server-side dry-run create on %d of %d requests (%d accepted, %d rejected by the server; Warn %d, Strict %d, Ignore %d)",
		what, d.agree, d.total, d.verdict[Accepted], d.verdict[Rejected], d.byMode[FieldValidationWarn], d.byMode[FieldValidationStrict], d.byMode[FieldValidationIgnore])
	if d.total == 0 {
		d.t.Errorf("%s: no object was compared", what)
	}
}

// TestPreviewMatchesServerDryRun is the acceptance bar of preview: for the test CRDs and many
// generated objects, preview's object, warnings, errors and verdict equal those of a
// server-side dry-run create on the real API server, in every fieldValidation mode.
func TestPreviewMatchesServerDryRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	d := newDifferential(t)
	files, err := filepath.Glob(filepath.Join("..", "testdata", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test CRDs: %v", err)
	}
	for i, f := range files {
		for _, crd := range readCRDFile(t, f) {
			d.runCRD(ctx, crd, 150, int64(i+1))
		}
	}
	d.report("testdata CRDs")
}

// TestPreviewMatchesServerDryRunCorpus does the same over the real CRDs of public projects in
// ../shared/corpus/crds (beside the clone), when that folder exists.
func TestPreviewMatchesServerDryRunCorpus(t *testing.T) {
	dir, ok := corpusDir()
	if !ok {
		t.Skipf("no CRD corpus at %s (it lives beside the repository clone): skipping the corpus differential test", dir)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Skipf("no CRDs in %s", dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	d := newDifferential(t)
	for i, f := range files {
		for _, crd := range readCRDFile(t, f) {
			d.runCRD(ctx, crd, 40, int64(100+i))
		}
	}
	d.report(fmt.Sprintf("corpus (%d files)", len(files)))
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 64*1024) }
