package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/crdschema"
	"github.com/crdver/kubectl-crdver/kubeversion"
)

// crdSource is where a command's CRD comes from: files (-f/--crd-file) or, when none are
// given, the cluster.
type crdSource struct {
	g     *Globals
	files []string
	flag  string // the flag name, for messages
	// loaded caches what fromFiles read: stdin can be read only once.
	loaded []*apiextensionsv1.CustomResourceDefinition
	// listed caches the cluster's CRDs: one LIST per run, however many names are resolved.
	listed []*apiextensionsv1.CustomResourceDefinition
	// input holds -R, -v and --strict-kinds, when the command has them.
	input *inputFlags
	// cmd gives fromFiles the command's context (Ctrl-C).
	cmd *cobra.Command
	// kube is --kube-version, when the command has it: CRD files are validated as that
	// Kubernetes version (else as the version the run emulates).
	kube *kubeVersionFlag
}

func addCRDFileFlag(cmd *cobra.Command, g *Globals, name, shorthand string) *crdSource {
	s := &crdSource{g: g, flag: name, cmd: cmd}
	cmd.Flags().StringSliceVarP(&s.files, name, shorthand, nil,
		"Read CRDs from these files or directories (- for stdin) instead of the cluster; apiextensions.k8s.io v1 or v1beta1, several documents per file")
	return s
}

func (s *crdSource) offline() bool { return len(s.files) > 0 }

// crdClient is the run's apiextensions clientset (protobuf).
func (g *Globals) crdClient() (apiextensionsclient.Interface, error) {
	c, err := g.clients()
	if err != nil {
		return nil, err
	}
	return c.CRDs()
}

// all returns every CRD of the files, or of the cluster (listed once per run).
func (s *crdSource) all(ctx context.Context) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if s.offline() {
		return s.load(ctx)
	}
	if s.listed != nil {
		return s.listed, nil
	}
	c, err := s.g.crdClient()
	if err != nil {
		return nil, err
	}
	crds, err := listCRDs(ctx, c)
	if err != nil {
		return nil, err
	}
	s.listed = crds
	return crds, nil
}

// listCRDs lists every CRD of the cluster in one call.
func listCRDs(ctx context.Context, c apiextensionsclient.Interface) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	list, err := c.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, clusterError("listing CustomResourceDefinitions", err)
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// one resolves name to a single CRD. In files, an empty name is fine when they hold exactly
// one CRD. In the cluster, a full name is one GET; anything else (plural, singular, short
// name, kind) is matched against the list of CRDs.
func (s *crdSource) one(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	if s.offline() {
		crds, err := s.load(ctx)
		if err != nil {
			return nil, err
		}
		where := strings.Join(s.files, ", ")
		if name == "" {
			if len(crds) == 1 {
				return crds[0], nil
			}
			return nil, UsageErrorf("%s holds %d CustomResourceDefinitions (%s): name the one you mean", where, len(crds), strings.Join(crdNames(crds), ", "))
		}
		crd, err := matchCRD(crds, name)
		if err != nil {
			return nil, Usage(fmt.Errorf("%s: %w", where, err))
		}
		return crd, nil
	}
	if name == "" {
		return nil, UsageErrorf("name a CustomResourceDefinition (e.g. crontabs.stable.example.com), or read one from a file with --%s", s.flag)
	}
	c, err := s.g.crdClient()
	if err != nil {
		return nil, err
	}
	if strings.Contains(name, ".") && s.listed == nil {
		// Most likely a full name: one GET, the cheapest answer.
		crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return crd, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, clusterError(fmt.Sprintf("getting CustomResourceDefinition %q", name), err)
		}
	}
	crds, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	crd, err := matchCRD(crds, name)
	if errors.Is(err, errNoMatch) {
		return nil, Usage(fmt.Errorf("%w (kubectl get crds lists them)", err))
	}
	return crd, Usage(err)
}

// byGroupKind finds the CRD that defines kind in group, among the files or the cluster's CRDs
// (one LIST per run, whatever the number of kinds asked for).
func (s *crdSource) byGroupKind(ctx context.Context, group, kind string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	var found *apiextensionsv1.CustomResourceDefinition
	for _, c := range crds {
		if c.Spec.Group == group && c.Spec.Names.Kind == kind {
			found = c
		}
	}
	if found != nil {
		return found, nil
	}
	if s.offline() {
		return nil, UsageErrorf("no CustomResourceDefinition in %s defines kind %s of group %q (have: %s)", strings.Join(s.files, ", "), kind, group, strings.Join(crdNames(crds), ", "))
	}
	return nil, UsageErrorf("%w kind %s of group %q (kubectl get crds lists them)", errNoMatch, kind, group)
}

// crdOrPath is the one place that decides whether a command's single argument names a CRD or
// is a field path: with CRD files, it is the CRD when it names one of them, else the path (and
// the files must hold exactly one CRD); from the cluster it is always the CRD. It returns the
// CRD and the path.
func (s *crdSource) crdOrPath(ctx context.Context, name, path string) (*apiextensionsv1.CustomResourceDefinition, string, error) {
	if s.offline() && path == "" && name != "" {
		crds, err := s.fromFiles()
		if err != nil {
			return nil, "", err
		}
		if crd, err := matchCRD(crds, name); err == nil {
			return crd, "", nil
		}
		if len(crds) == 1 {
			return crds[0], name, nil
		}
	}
	crd, err := s.one(ctx, name)
	return crd, path, err
}

// fromFiles reads every CRD of the files (see load).
func (s *crdSource) fromFiles() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	ctx := context.Background()
	if s.cmd != nil && s.cmd.Context() != nil {
		ctx = s.cmd.Context()
	}
	return s.load(ctx)
}

// load reads the CRDs of the files, one document at a time: documents that are not CRDs are
// skipped (counted on stderr, listed with -v; errors with --strict-kinds), and every CRD is
// checked with the API server's own validation. The result is cached: stdin can be read once.
func (s *crdSource) load(ctx context.Context) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if s.loaded != nil {
		return s.loaded, nil
	}
	if s.kube != nil && !s.kube.v.IsZero() {
		if err := kubeversion.Emulate(s.kube.v); err != nil {
			return nil, err
		}
	}
	where := strings.Join(s.files, ", ")
	skipped := &skipList{what: "not a CustomResourceDefinition", one: "is not a CustomResourceDefinition"}
	crds := []*apiextensionsv1.CustomResourceDefinition{}
	docs := 0
	err := EachDocument(ctx, s.files, s.inputOptions(), func(d Document) error {
		docs++
		if !crdinfo.IsCRD(d.APIVersion, d.Kind) {
			if s.input != nil && s.input.StrictKinds {
				return UsageErrorf("%s: %s is not a CustomResourceDefinition (want apiextensions.k8s.io/v1 or v1beta1; --strict-kinds)", d.Where(), describeDoc(d))
			}
			skipped.add(d)
			return nil
		}
		var warnOut io.Writer
		if s.input != nil && s.input.Verbose {
			warnOut = s.g.ErrOut
		}
		crd, err := decodeCRD(ctx, d, warnOut)
		if err != nil {
			return err
		}
		crds = append(crds, crd)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if docs == 0 {
		return nil, UsageErrorf("%s: no documents found", where)
	}
	if len(crds) == 0 {
		return nil, UsageErrorf("%s: no CustomResourceDefinition found: the first of %s is %s", where, plural(skipped.n, "document"), skipped.firstWhy)
	}
	if err := skipped.report(s.g.ErrOut, s.input != nil && s.input.Verbose); err != nil {
		return nil, err
	}
	s.loaded = crds
	return crds, nil
}

func (s *crdSource) inputOptions() InputOptions {
	o := InputOptions{Stdin: s.g.In}
	if s.input != nil {
		o.Recursive = s.input.Recursive
	}
	return o
}

func describeDoc(d Document) string {
	what := strings.TrimSpace(d.APIVersion + " " + d.Kind)
	if what == "" {
		what = "a document with no apiVersion and kind"
	}
	return what
}

// decodeCRD decodes one CRD document and checks it with the API server's validation: an
// invalid CRD is an error (exit 2). A v1beta1 CRD, which API servers since 1.22 refuse
// altogether, is still read for analysis (explain shows its non-structural schema, for one);
// what v1 validation says of it is a warning on warnOut (-v), when warnOut is not nil.
func decodeCRD(ctx context.Context, d Document, warnOut io.Writer) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := decodeOne(d)
	if err != nil {
		return nil, err
	}
	errs, err := crdschema.Validate(ctx, crd)
	if err != nil {
		return nil, UsageErrorf("%s: %s: %v", d.Where(), crd.Name, err)
	}
	if len(errs) == 0 {
		return crd, nil
	}
	invalid := UsageErrorf("%s: %w", d.Where(), &crdschema.InvalidError{Name: crd.Name, Errors: errs, KubeVersion: kubeversion.Emulated().String()})
	if d.APIVersion == "apiextensions.k8s.io/v1beta1" {
		if warnOut != nil {
			fmt.Fprintf(warnOut, "warning: %s (apiextensions.k8s.io/v1beta1 is refused by API servers since 1.22; as v1 it would be refused for these errors)\n", invalid)
		}
		return crd, nil
	}
	return nil, invalid
}

// decodeOne decodes one CRD document (v1 or v1beta1) without validating it.
func decodeOne(d Document) (*apiextensionsv1.CustomResourceDefinition, error) {
	if !crdinfo.IsCRD(d.APIVersion, d.Kind) {
		return nil, UsageErrorf("%s: %s is not a CustomResourceDefinition (want apiextensions.k8s.io/v1 or v1beta1)", d.Where(), describeDoc(d))
	}
	crd, err := crdinfo.Decode(d.JSON)
	if err != nil {
		return nil, UsageErrorf("%s: %v", d.Where(), err)
	}
	if crd.Name == "" {
		return nil, UsageErrorf("%s: CustomResourceDefinition has no metadata.name", d.Where())
	}
	if !hasStoredVersions(d.JSON) {
		// Decoding defaults an empty status.storedVersions to [storage version]: an
		// assumption, not a fact. Only the cluster knows what it stored.
		crd.Status.StoredVersions = nil
	}
	return crd, nil
}

// decodeCRDs decodes documents that must all be CRDs (without the API server's validation).
func decodeCRDs(docs []Document) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(docs))
	for _, d := range docs {
		crd, err := decodeOne(d)
		if err != nil {
			return nil, err
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// hasStoredVersions reports whether a CRD document carries a non-empty status.storedVersions.
func hasStoredVersions(js []byte) bool {
	var doc struct {
		Status struct {
			StoredVersions []string `json:"storedVersions"`
		} `json:"status"`
	}
	return json.Unmarshal(js, &doc) == nil && len(doc.Status.StoredVersions) > 0
}

var errNoMatch = errors.New("no CustomResourceDefinition matches")

// matchCRD finds the CRD called name: its full name, or (case-insensitively) its plural,
// singular, a short name or its kind, optionally followed by ".<group>". More than one match is
// an error that lists them.
func matchCRD(crds []*apiextensionsv1.CustomResourceDefinition, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	var exact []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		if crd.Name == name {
			exact = append(exact, crd)
		}
	}
	switch {
	case len(exact) == 1:
		return exact[0], nil
	case len(exact) > 1:
		return nil, fmt.Errorf("%s is defined %d times: pass only one file that defines it", name, len(exact))
	}
	want := strings.ToLower(name)
	var found []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		n := crd.Spec.Names
		aliases := append([]string{n.Plural, n.Singular, strings.ToLower(n.Kind)}, n.ShortNames...)
		for _, a := range aliases {
			if a == "" {
				continue
			}
			a = strings.ToLower(a)
			if want == a || want == a+"."+strings.ToLower(crd.Spec.Group) {
				found = append(found, crd)
				break
			}
		}
	}
	switch names := crdNames(found); {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1 && names[0] == names[len(names)-1]:
		return nil, fmt.Errorf("%q matches %s, which is defined %d times: pass only one file that defines it", name, names[0], len(found))
	case len(found) == 0:
		return nil, fmt.Errorf("%w %q", errNoMatch, name)
	default:
		return nil, fmt.Errorf("%q is ambiguous: it matches %s; use the full name", name, strings.Join(crdNames(found), ", "))
	}
}

func crdNames(crds []*apiextensionsv1.CustomResourceDefinition) []string {
	names := make([]string, len(crds))
	for i, c := range crds {
		names[i] = c.Name
	}
	sort.Strings(names)
	return names
}

// completeCRDNames completes CRD names from the cluster for shell completion.
func completeCRDNames(g *Globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := g.crdClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		crds, err := listCRDs(cmd.Context(), c)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, crd := range crds {
			if strings.HasPrefix(crd.Name, toComplete) {
				out = append(out, crd.Name)
			}
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
