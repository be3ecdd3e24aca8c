package versiondiff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/preview"
)

// warnings collects the Warning headers of the API server's answers.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// apiServer is one running kube-apiserver, asked with dry-run requests only (besides the
// CRDs the test installs).
type apiServer struct {
	raw      rest.Interface
	crds     apiextensionsclient.Interface
	warnings *warnings
}

func newAPIServer(cfg *rest.Config) (*apiServer, error) {
	c := rest.CopyConfig(cfg)
	w := &warnings{}
	c.WarningHandler = w
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	crds, err := apiextensionsclient.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	return &apiServer{raw: cs.Discovery().RESTClient(), crds: crds, warnings: w}, nil
}

// crdAnswer is the server's answer to a dry-run create or update of a CRD: nil when it was
// allowed, the error when the server refused it (invalid or bad request). Any other failure
// is returned as the second value: the comparison cannot be made.
func crdAnswer(err error) (refusal, failure error) {
	if err == nil {
		return nil, nil
	}
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return err, nil
	}
	return nil, err
}

// dryRunCreateCRD is `kubectl create --dry-run=server` of a CRD.
func (s *apiServer) dryRunCreateCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (refusal, failure error) {
	_, err := s.crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return crdAnswer(err)
}

// dryRunUpdateCRD is `kubectl replace --dry-run=server` of next over the live CRD.
func (s *apiServer) dryRunUpdateCRD(ctx context.Context, live, next *apiextensionsv1.CustomResourceDefinition) (refusal, failure error) {
	obj := next.DeepCopy()
	obj.ResourceVersion = live.ResourceVersion
	_, err := s.crds.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, obj, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	return crdAnswer(err)
}

// objectAnswer is the server's answer to a dry-run create of an object, shaped like a preview.
type objectAnswer struct {
	verdict  string
	object   map[string]any
	warnings []string
	errors   []preview.PreviewError
}

// dryRunCreate is `kubectl create --dry-run=server --validate=<fv>` of one object, sent as
// raw bytes so that the server reads what preview read.
func (s *apiServer) dryRunCreate(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, version, namespace string, body []byte, fv preview.FieldValidation) (*objectAnswer, error) {
	path := []string{"/apis", crd.Spec.Group, version}
	if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
		path = append(path, "namespaces", namespace)
	}
	path = append(path, crd.Spec.Names.Plural)
	s.warnings.take()
	out, err := s.raw.Post().AbsPath(strings.Join(path, "/")).Param("dryRun", "All").Param("fieldValidation", string(fv)).
		SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Raw()
	a := &objectAnswer{warnings: s.warnings.take()}
	if err == nil {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(out); err != nil {
			return nil, err
		}
		a.verdict, a.object = preview.Accepted, u.Object
		return a, nil
	}
	// The Status is decoded here: the client's decoder does not know the CRD's group.
	var st metav1.Status
	if jerr := json.Unmarshal(out, &st); jerr != nil || st.Kind != "Status" {
		var se apierrors.APIStatus
		if !errors.As(err, &se) {
			return nil, err
		}
		st = se.Status()
	}
	if st.Code >= 500 || st.Code == 0 {
		return nil, fmt.Errorf("server error: %w: %s", err, out)
	}
	a.verdict = preview.Rejected
	if st.Details != nil && len(st.Details.Causes) > 0 {
		for _, c := range st.Details.Causes {
			a.errors = append(a.errors, preview.PreviewError{Field: c.Field, Type: string(c.Type), Message: c.Message})
		}
	} else {
		a.errors = append(a.errors, preview.PreviewError{Type: string(st.Reason), Message: st.Message})
	}
	return a, nil
}

// serverOnly are the metadata fields only the server sets (or preview leaves out).
var serverOnly = []string{"uid", "creationTimestamp", "managedFields", "resourceVersion", "generation"}

func withoutServerOnly(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	c := runtimeCopy(obj)
	for _, f := range serverOnly {
		unstructured.RemoveNestedField(c, "metadata", f)
	}
	return c
}

// runtimeCopy copies obj through JSON, so that numbers compare as the server's decoder reads
// them whatever Go types preview built them with.
func runtimeCopy(obj map[string]any) map[string]any {
	b, err := json.Marshal(obj)
	if err != nil {
		return map[string]any{"unmarshalable": err.Error()}
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return map[string]any{"unmarshalable": err.Error()}
	}
	return u.Object
}

func errorLines(errs []preview.PreviewError) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Field+"|"+e.Type+"|"+e.Message)
	}
	sort.Strings(out)
	return out
}

// celValueWording is how API servers up to 1.34 word a failed x-kubernetes-validations rule:
// `Invalid value: "<the field's type>": <message>`. From 1.35 the value is the field's value
// for a scalar and left out for an object or array (apiextensions-apiserver's CEL validator;
// no version switch covers it): a difference in wording only, never in the verdict
// (kubeversion.Differences: cel-error-value).
var celValueWording = regexp.MustCompile(`^Invalid value: "(object|array|string|integer|number|boolean)": (.*)$`)

// sameButCELWording reports whether the server's error (a server up to 1.34) and preview's
// differ only in that wording.
func sameButCELWording(server, ours preview.PreviewError) bool {
	if server.Field != ours.Field || server.Type != ours.Type {
		return false
	}
	m := celValueWording.FindStringSubmatch(server.Message)
	return m != nil && strings.HasPrefix(ours.Message, "Invalid value: ") && strings.HasSuffix(ours.Message, m[2])
}

// celWordingOnly reports whether the two error lists pair up, each pair equal or differing
// only in the 1.34 wording of a failed rule, with at least one such pair.
func celWordingOnly(server, ours []preview.PreviewError) bool {
	if len(server) != len(ours) {
		return false
	}
	a, b := append([]preview.PreviewError{}, server...), append([]preview.PreviewError{}, ours...)
	byField := func(es []preview.PreviewError) {
		sort.SliceStable(es, func(i, j int) bool { return es[i].Field+es[i].Type < es[j].Field+es[j].Type })
	}
	byField(a)
	byField(b)
	worded := false
	for i := range a {
		switch {
		case a[i] == b[i]:
		case sameButCELWording(a[i], b[i]):
			worded = true
		default:
			return false
		}
	}
	return worded
}

// previewDiff is "" when preview said what the server said (verdict, warnings, errors, the
// object), else what differs. wordingOnly is set when the only difference is the wording of
// failed rules of servers up to 1.34 (celValueWording).
func previewDiff(p *preview.PreviewResult, s *objectAnswer) (diff string, wordingOnly bool) {
	if d := previewDiffExact(p, s); d == "" || p.Verdict != preview.Rejected || s.verdict != preview.Rejected {
		return d, false
	} else if celWordingOnly(s.errors, p.Errors) && cmp.Equal(slices.Sorted(slices.Values(s.warnings)), slices.Sorted(slices.Values(p.Warnings))) {
		return d, true
	} else {
		return d, false
	}
}

func previewDiffExact(p *preview.PreviewResult, s *objectAnswer) string {
	if p.Verdict != s.verdict {
		return fmt.Sprintf("verdict: preview %s, server %s (preview errors %v, server errors %v)", p.Verdict, s.verdict, p.Errors, s.errors)
	}
	var diffs []string
	if d := cmp.Diff(slices.Sorted(slices.Values(s.warnings)), slices.Sorted(slices.Values(p.Warnings))); d != "" {
		diffs = append(diffs, "warnings (-server +preview):\n"+d)
	}
	switch p.Verdict {
	case preview.Rejected:
		if d := cmp.Diff(errorLines(s.errors), errorLines(p.Errors)); d != "" {
			diffs = append(diffs, "errors (-server +preview):\n"+d)
		}
	case preview.Accepted:
		if d := cmp.Diff(withoutServerOnly(s.object), withoutServerOnly(p.Object)); d != "" {
			diffs = append(diffs, "object (-server +preview):\n"+d)
		}
	}
	return strings.Join(diffs, "\n")
}
