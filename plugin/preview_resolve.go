package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// previewResolver finds the CRD of each object: the CRD named on the command line, the CRDs of
// --crd-file and of the input itself, or (with neither a name nor --crd-file) the cluster's.
type previewResolver struct {
	o     *PreviewOptions
	named *apiextensionsv1.CustomResourceDefinition
	local map[gkKey]localCRD
	// cluster is every CRD of the cluster, listed once, on the first object no local CRD
	// defines; nil until then.
	cluster map[gkKey]*apiextensionsv1.CustomResourceDefinition
	// prescanned names the CRD documents of the input files read before the objects.
	prescanned map[string]bool
}

type localCRD struct {
	crd   *apiextensionsv1.CustomResourceDefinition
	where string
}

func (o *PreviewOptions) newResolver(ctx context.Context) (*previewResolver, error) {
	r := &previewResolver{o: o, local: map[gkKey]localCRD{}, prescanned: map[string]bool{}}
	if o.CRDName != "" {
		crd, err := o.source.one(ctx, o.CRDName)
		if err != nil {
			return nil, err
		}
		r.named = crd
		return r, nil
	}
	if o.source.offline() {
		crds, err := o.source.load(ctx)
		if err != nil {
			return nil, err
		}
		for _, crd := range crds {
			if err := r.add(crd, "--crd-file "+strings.Join(o.source.files, ",")); err != nil {
				return nil, err
			}
		}
	}
	return r, r.prescan(ctx)
}

// prescan reads the CRDs of the input files (not stdin or URLs, which can be read once)
// before their objects, so that a CRD used by objects before it in the files (a directory
// read in name order) is found. In stdin and URLs, CRDs must come first, as helm template and
// kustomize build print them.
func (r *previewResolver) prescan(ctx context.Context) error {
	if r.named != nil {
		return nil
	}
	var files []string
	for _, f := range r.o.Files {
		if f != "-" && !isURL(f) {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil
	}
	opts := InputOptions{Recursive: r.o.input.Recursive, Prefilter: []byte("CustomResourceDefinition")}
	return EachDocument(ctx, files, opts, func(d Document) error {
		if !crdinfo.IsCRD(d.APIVersion, d.Kind) {
			return nil
		}
		crd, err := decodeCRD(ctx, d, r.o.verboseOut())
		if err != nil {
			return err
		}
		r.prescanned[d.Where()] = true
		return r.addInput(d, crd)
	})
}

func (r *previewResolver) add(crd *apiextensionsv1.CustomResourceDefinition, where string) error {
	key := gkKey{crd.Spec.Group, crd.Spec.Names.Kind}
	if prev, ok := r.local[key]; ok {
		if apiequality.Semantic.DeepEqual(prev.crd.Spec, crd.Spec) {
			return nil
		}
		return UsageErrorf("%s %s is defined twice, differently: in %s and in %s; pass only one", crd.Spec.Group, crd.Spec.Names.Kind, prev.where, where)
	}
	r.local[key] = localCRD{crd: crd, where: where}
	return nil
}

// addInput takes a CRD found among the objects: it is used for the objects after it.
func (r *previewResolver) addInput(d Document, crd *apiextensionsv1.CustomResourceDefinition) error {
	if r.named != nil {
		return nil // the named CRD is the only one used
	}
	return r.add(crd, d.Where())
}

// find returns the CRD that defines d's kind, or nil when none does.
func (r *previewResolver) find(ctx context.Context, d Document, gv schema.GroupVersion) (*apiextensionsv1.CustomResourceDefinition, error) {
	key := gkKey{gv.Group, d.Kind}
	if r.named != nil {
		if r.named.Spec.Group == gv.Group && r.named.Spec.Names.Kind == d.Kind {
			return r.named, nil
		}
		return nil, nil
	}
	if c, ok := r.local[key]; ok {
		return c.crd, nil
	}
	if r.o.source.offline() || builtIn(gv.WithKind(d.Kind)) {
		return nil, nil
	}
	if r.cluster == nil {
		crds, err := r.o.source.all(ctx)
		if err != nil {
			var ee *ExitError
			if errors.As(err, &ee) && ee.Code == ExitUnavailable {
				return nil, Unavailable(fmt.Errorf("%s: %s %s: no CustomResourceDefinition for it in the input, and %w; give the CRDs with --crd-file (or in the input, before the objects) to work offline",
					d.Where(), d.APIVersion, d.Kind, err))
			}
			return nil, err
		}
		r.cluster = map[gkKey]*apiextensionsv1.CustomResourceDefinition{}
		for _, c := range crds {
			r.cluster[gkKey{c.Spec.Group, c.Spec.Names.Kind}] = c
		}
	}
	return r.cluster[key], nil
}

// builtIn reports whether gvk can never be a custom resource: a kind the API server has
// built in, or a group without a dot (a CRD's group must have one).
func builtIn(gvk schema.GroupVersionKind) bool {
	return !strings.Contains(gvk.Group, ".") || clientgoscheme.Scheme.Recognizes(gvk)
}

func (r *previewResolver) unmatchedError(d Document) error {
	switch {
	case r.named != nil:
		return UsageErrorf("%s: %s %s does not belong to CustomResourceDefinition %s (group %s, kind %s; --strict-kinds)",
			d.Where(), d.APIVersion, d.Kind, r.named.Name, r.named.Spec.Group, r.named.Spec.Names.Kind)
	case r.o.source.offline():
		var have []*apiextensionsv1.CustomResourceDefinition
		for _, c := range r.local {
			have = append(have, c.crd)
		}
		return UsageErrorf("%s: no CustomResourceDefinition in %s or in the input defines %s %s (have: %s; --strict-kinds)",
			d.Where(), strings.Join(r.o.source.files, ", "), d.APIVersion, d.Kind, strings.Join(crdNames(have), ", "))
	}
	return UsageErrorf("%s: no CustomResourceDefinition defines %s %s, in the input or in the cluster (--strict-kinds)", d.Where(), d.APIVersion, d.Kind)
}
