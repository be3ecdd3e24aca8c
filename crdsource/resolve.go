package crdsource

import (
	"context"
	"fmt"
	"io"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/manifest"
)

// Resolver finds the CRD of each object of an input: the one named CRD, else the CRDs of the
// Source's files and of the input itself (a CRD is used for the objects after it), else (with
// neither a name nor files) the cluster's, listed once on the first object no local CRD
// defines.
type Resolver struct {
	src   *Source
	named *apiextensionsv1.CustomResourceDefinition
	local map[schema.GroupKind]localCRD
	// cluster is every CRD of the cluster by group and kind; nil until listed.
	cluster map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition
	// prescanned names the CRD documents of the input files read before the objects.
	prescanned map[string]bool
	warn       io.Writer
}

type localCRD struct {
	crd   *apiextensionsv1.CustomResourceDefinition
	where string
}

// NoCRDError is an object whose CRD is not in the input and could not be looked for in the
// cluster (Err says why).
type NoCRDError struct {
	Where, APIVersion, Kind string
	Err                     error
}

func (e *NoCRDError) Error() string {
	return fmt.Sprintf("%s: %s %s: no CustomResourceDefinition for it in the input, and %v", e.Where, e.APIVersion, e.Kind, e.Err)
}
func (e *NoCRDError) Unwrap() error { return e.Err }

// NewResolver builds the resolver of an input read from inputs (opts.Recursive): name, when
// not empty, is the only CRD used (src.One); else the CRDs of src's files, and those of the
// input's regular files (not stdin, URLs or pipes, which can be read once) are read first, so
// that a CRD used by objects before it in the files (a directory read in name order) is found.
// In stdin, URLs and pipes, CRDs must come first, as helm template and kustomize build print
// them. filesLabel names src's files in messages; warn gets Decode's warnings.
func NewResolver(ctx context.Context, src *Source, name, filesLabel string, inputs []string, opts manifest.Options, warn io.Writer) (*Resolver, error) {
	r := &Resolver{src: src, local: map[schema.GroupKind]localCRD{}, prescanned: map[string]bool{}, warn: warn}
	if name != "" {
		crd, err := src.One(ctx, name)
		if err != nil {
			return nil, err
		}
		r.named = crd
		return r, nil
	}
	if src.Offline() {
		crds, err := src.Load(ctx)
		if err != nil {
			return nil, err
		}
		for _, crd := range crds {
			if err := r.add(crd, filesLabel); err != nil {
				return nil, err
			}
		}
	}
	// Only regular files are read twice: a pipe (process substitution, a FIFO, /dev/stdin)
	// would give its documents to this first read and leave none for the objects.
	var files []string
	for _, p := range inputs {
		if p == "-" || manifest.IsURL(p) {
			continue
		}
		expanded, err := manifest.ExpandPath(p, opts.Recursive)
		if err != nil {
			continue // the read of the objects reports it
		}
		for _, f := range expanded {
			if manifest.Rereadable(f) {
				files = append(files, f)
			}
		}
	}
	if len(files) == 0 {
		return r, nil
	}
	opts.Stdin, opts.Progress, opts.Prefilter = nil, nil, []byte("CustomResourceDefinition")
	return r, manifest.EachDocument(ctx, files, opts, func(d manifest.Document) error {
		if !crdinfo.IsCRD(d.APIVersion, d.Kind) {
			return nil
		}
		crd, err := Decode(ctx, d, src.KubeVersion, warn)
		if err != nil {
			return err
		}
		r.prescanned[d.Where()] = true
		return r.AddInput(d, crd)
	})
}

// Named is the named CRD, nil when none was named.
func (r *Resolver) Named() *apiextensionsv1.CustomResourceDefinition { return r.named }

// Local is every CRD of the files and of the input read so far.
func (r *Resolver) Local() []*apiextensionsv1.CustomResourceDefinition {
	var have []*apiextensionsv1.CustomResourceDefinition
	for _, c := range r.local {
		have = append(have, c.crd)
	}
	return have
}

// Prescanned reports whether the CRD document at where (manifest.Document.Where) was read
// already by NewResolver.
func (r *Resolver) Prescanned(where string) bool { return r.prescanned[where] }

func (r *Resolver) add(crd *apiextensionsv1.CustomResourceDefinition, where string) error {
	key := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
	if prev, ok := r.local[key]; ok {
		if apiequality.Semantic.DeepEqual(prev.crd.Spec, crd.Spec) {
			return nil
		}
		return inputErrorf("%s %s is defined twice, differently: in %s and in %s; pass only one", crd.Spec.Group, crd.Spec.Names.Kind, prev.where, where)
	}
	r.local[key] = localCRD{crd: crd, where: where}
	return nil
}

// AddInput takes a CRD found among the objects: it is used for the objects after it.
func (r *Resolver) AddInput(d manifest.Document, crd *apiextensionsv1.CustomResourceDefinition) error {
	if r.named != nil {
		return nil // the named CRD is the only one used
	}
	return r.add(crd, d.Where())
}

// Find returns the CRD that defines d's kind (of group gv.Group), or nil when none does. An
// object no local CRD defines, when the cluster's CRDs cannot be listed, is a *NoCRDError.
func (r *Resolver) Find(ctx context.Context, d manifest.Document, gv schema.GroupVersion) (*apiextensionsv1.CustomResourceDefinition, error) {
	key := schema.GroupKind{Group: gv.Group, Kind: d.Kind}
	if r.named != nil {
		if r.named.Spec.Group == gv.Group && r.named.Spec.Names.Kind == d.Kind {
			return r.named, nil
		}
		return nil, nil
	}
	if c, ok := r.local[key]; ok {
		return c.crd, nil
	}
	if r.src.Offline() || BuiltIn(gv.WithKind(d.Kind)) {
		return nil, nil
	}
	if r.cluster == nil {
		crds, err := r.src.All(ctx)
		if err != nil {
			return nil, &NoCRDError{Where: d.Where(), APIVersion: d.APIVersion, Kind: d.Kind, Err: err}
		}
		r.cluster = map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition{}
		for _, c := range crds {
			r.cluster[schema.GroupKind{Group: c.Spec.Group, Kind: c.Spec.Names.Kind}] = c
		}
	}
	return r.cluster[key], nil
}

// BuiltIn reports whether gvk can never be a custom resource: a kind the API server has
// built in, or a group without a dot (a CRD's group must have one).
func BuiltIn(gvk schema.GroupVersionKind) bool {
	return !strings.Contains(gvk.Group, ".") || clientgoscheme.Scheme.Recognizes(gvk)
}
