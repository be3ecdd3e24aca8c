package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdver/kubectl-crdver/crdsource"
)

// previewResolver is crdsource.Resolver for preview: the CRD named on the command line, the
// CRDs of --crd-file and of the input itself, or (with neither a name nor --crd-file) the
// cluster's; its errors given exit codes and worded with preview's flags.
type previewResolver struct {
	*crdsource.Resolver
	o *PreviewOptions
}

func (o *PreviewOptions) newResolver(ctx context.Context) (*previewResolver, error) {
	if o.source.offline() {
		if _, err := o.source.load(ctx); err != nil {
			return nil, err
		}
	}
	opts := InputOptions{Recursive: o.input.Recursive}
	r, err := crdsource.NewResolver(ctx, o.source.lib(), o.CRDName, "--crd-file "+strings.Join(o.source.files, ","), o.Files, opts, o.verboseOut())
	if err != nil {
		return nil, o.source.sourceError(err)
	}
	return &previewResolver{Resolver: r, o: o}, nil
}

// find returns the CRD that defines d's kind, or nil when none does.
func (r *previewResolver) find(ctx context.Context, d Document, gv schema.GroupVersion) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := r.Find(ctx, d, gv)
	var nce *crdsource.NoCRDError
	if errors.As(err, &nce) {
		inner := r.o.source.sourceError(nce.Err)
		var ee *ExitError
		if errors.As(inner, &ee) && ee.Code == ExitUnavailable {
			return nil, Unavailable(fmt.Errorf("%s: %s %s: no CustomResourceDefinition for it in the input, and %w; give the CRDs with --crd-file (or in the input, before the objects) to work offline",
				nce.Where, nce.APIVersion, nce.Kind, inner))
		}
		return nil, inner
	}
	return crd, err
}

func (r *previewResolver) unmatchedError(d Document) error {
	switch named := r.Named(); {
	case named != nil:
		return UsageErrorf("%s: %s %s does not belong to CustomResourceDefinition %s (group %s, kind %s; --strict-kinds)",
			d.Where(), d.APIVersion, d.Kind, named.Name, named.Spec.Group, named.Spec.Names.Kind)
	case r.o.source.offline():
		return UsageErrorf("%s: no CustomResourceDefinition in %s or in the input defines %s %s (have: %s; --strict-kinds)",
			d.Where(), strings.Join(r.o.source.files, ", "), d.APIVersion, d.Kind, strings.Join(crdsource.Names(r.Local()), ", "))
	}
	return UsageErrorf("%s: no CustomResourceDefinition defines %s %s, in the input or in the cluster (--strict-kinds)", d.Where(), d.APIVersion, d.Kind)
}
