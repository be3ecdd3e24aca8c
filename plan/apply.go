package plan

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/apistatus"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/preview"
)

// Sources of an Item's apply verdict (Item.ApplyVerdictSource).
const (
	// VerdictServerDryRun: the API server answered a server-side dry-run create or update of
	// the new CRD (exact for that server, admission included).
	VerdictServerDryRun = "server-dry-run"
	// VerdictOffline: the API server's CRD validation run here, as the Kubernetes version
	// of Options.KubeVersion.
	VerdictOffline = "offline"
)

// checkApplyFor is the apply verdict from the server (Options.DryRun set and the live CRD from
// that server) or, failing that, computed offline.
func checkApplyFor(ctx context.Context, live, next *apiextensionsv1.CustomResourceDefinition, opts Options) (Apply, []string, string, []string, error) {
	if opts.DryRun != nil {
		a, stored, err := dryRunApply(ctx, opts.DryRun, live, next)
		if err == nil {
			return a, stored, VerdictServerDryRun, nil, nil
		}
		if ctx.Err() != nil {
			return Apply{}, nil, "", nil, ctx.Err()
		}
		note := fmt.Sprintf("the server-side dry-run of the CRD %s failed (%v): the apply verdict is computed offline", applyVerb(live), err)
		a, stored, err = checkApply(ctx, live, next)
		return a, stored, VerdictOffline, []string{note}, err
	}
	a, stored, err := checkApply(ctx, live, next)
	return a, stored, VerdictOffline, nil, err
}

func applyVerb(live *apiextensionsv1.CustomResourceDefinition) string {
	if live == nil {
		return "create"
	}
	return "update"
}

// dryRunApply asks the API server: a create (live == nil) or an update of the new CRD on the
// live object's identity (what a replace or apply sends), with dryRun=All. A refusal of the CRD
// (apistatus.Refused: invalid, or denied by an admission policy or webhook) is the verdict;
// anything else (unreachable, a conflict, no permission after all) is an error, and the
// caller computes the verdict offline.
func dryRunApply(ctx context.Context, c apiextensionsclient.Interface, live, next *apiextensionsv1.CustomResourceDefinition) (Apply, []string, error) {
	crds := c.ApiextensionsV1().CustomResourceDefinitions()
	obj := next.DeepCopy()
	obj.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	obj.ResourceVersion, obj.UID, obj.ManagedFields = "", "", nil
	var got *apiextensionsv1.CustomResourceDefinition
	var err error
	if live == nil {
		got, err = crds.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	} else {
		obj.ResourceVersion = live.ResourceVersion
		got, err = crds.Update(ctx, obj, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	}
	// The server's warnings go to the client's warning handler (the command's stderr).
	a := Apply{Allowed: err == nil, Errors: []string{}}
	if err != nil {
		if !apistatus.Refused(err) {
			return Apply{}, nil, err
		}
		a.Errors = append(a.Errors, err.Error())
		stored := []string{}
		if live != nil {
			stored = append(stored, live.Status.StoredVersions...)
		}
		return a, stored, nil
	}
	stored := append([]string{}, got.Status.StoredVersions...)
	if live == nil {
		// The CRD controller records the storage version once the CRD is created.
		stored = []string{crdinfo.StorageVersion(next)}
	}
	return a, stored, nil
}

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

// differenceNotes adds to notes the note of each known difference between Kubernetes versions
// (kubeversion.Differences) that errors depend on, once.
func differenceNotes(p *preview.Previewer, notes, errors []string) []string {
	for _, n := range kubeversion.NotesFor(p.KubeVersion(), kubeversion.CheckObjectValidation, errors) {
		if !slices.Contains(notes, n) {
			notes = append(notes, n)
		}
	}
	return notes
}
