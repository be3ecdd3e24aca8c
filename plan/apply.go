package plan

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

type warningRecorder struct{ warnings []string }

func (w *warningRecorder) AddWarning(_, text string) { w.warnings = append(w.warnings, text) }

// checkApply runs the API server's create or update path for the CRD itself
// (registry/customresourcedefinition's strategy through rest.BeforeCreate / BeforeUpdate:
// PrepareForUpdate keeps the live status and appends the new storage version to
// storedVersions, then validation.ValidateCustomResourceDefinitionUpdate, which includes the
// storedVersions rule). It returns the verdict and status.storedVersions after the apply.
func checkApply(ctx context.Context, live, next *apiextensionsv1.CustomResourceDefinition) (Apply, []string, error) {
	scheme := crdinfo.Scheme()
	st := customresourcedefinition.NewStrategy(scheme)
	rec := &warningRecorder{}
	ctx = warning.WithWarningRecorder(genericapirequest.WithNamespace(ctx, metav1.NamespaceNone), rec)

	newInternal := &apiextensions.CustomResourceDefinition{}
	if err := scheme.Convert(next.DeepCopy(), newInternal, nil); err != nil {
		return Apply{}, nil, fmt.Errorf("%s: converting the new CRD: %w", next.Name, err)
	}
	var err error
	if live == nil {
		// registry.Store.Create
		newInternal.Status = apiextensions.CustomResourceDefinitionStatus{}
		rest.FillObjectMetaSystemFields(newInternal)
		err = rest.BeforeCreate(st, ctx, newInternal)
	} else {
		oldInternal := &apiextensions.CustomResourceDefinition{}
		if err := scheme.Convert(live.DeepCopy(), oldInternal, nil); err != nil {
			return Apply{}, nil, fmt.Errorf("%s: converting the live CRD: %w", live.Name, err)
		}
		// What a replace or apply sends: the file's spec and metadata on the live object's
		// identity.
		if oldInternal.ResourceVersion == "" {
			oldInternal.ResourceVersion = "1" // a CRD from a file: the cluster's copy has one
		}
		newInternal.ResourceVersion = oldInternal.ResourceVersion
		newInternal.UID = oldInternal.UID
		newInternal.CreationTimestamp = oldInternal.CreationTimestamp
		err = rest.BeforeUpdate(st, ctx, newInternal, oldInternal)
	}
	a := Apply{Allowed: err == nil, Errors: []string{}, Warnings: rec.warnings}
	if err != nil {
		var se apierrors.APIStatus
		if !errors.As(err, &se) {
			return Apply{}, nil, err
		}
		a.Errors = append(a.Errors, se.Status().Message)
	}
	stored := append([]string{}, newInternal.Status.StoredVersions...)
	if live == nil && err == nil {
		// The CRD controller records the storage version once the CRD is created.
		stored = []string{crdinfo.StorageVersion(next)}
	}
	return a, stored, nil
}
