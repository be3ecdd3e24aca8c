package plan

// ownershiploss.go: the field managers the runbook's rewrite of an object drops, predicted
// offline (decision table: ownership-loss). The rewrite at the new storage version moves every
// managedFields entry of another version to it within its write (migrate's moveEntries:
// ownership.ToVersion); an entry it leaves (a version it cannot read, an ownership it cannot
// work out) makes the API server's field manager convert the written object to that entry's
// version, and when that fails (the version is gone from the CRD, or the object does not fit
// that version's typed schema) kube-apiserver before 1.37 drops every entry of the object
// (ownership.FailedUpdateDropsAll). The preflight of the rewrite finds the same by a server
// dry run of that write; plan names it first, so that the runbook's rewrite step carries the
// consent before the runbook's first write.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/ownership"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/preview"
)

// ManagersLost is what the rewrite does to one object's field managers.
type ManagersLost struct {
	// Lost are the managers dropped, "manager (Operation at apiVersion)" as the preflight
	// words them (every manager of the object: Reset).
	Lost  []string `json:"lost,omitempty"`
	Reset bool     `json:"reset,omitempty"`
	// Because says why the API server drops them.
	Because string `json:"because,omitempty"`
	// Unknown, when set, says why plan cannot tell (Lost is then empty).
	Unknown string `json:"unknown,omitempty"`
}

// ownersAtRewrite predicts, per object, the managers the rewrite at to under crd (the CRD in
// effect when the runbook rewrites: rewriteCRD) drops. It is nil when nothing can be lost:
// the server keeps the live entries of a failed update (1.37 on).
type ownersAtRewrite struct {
	crd     *apiextensionsv1.CustomResourceDefinition
	group   string
	to      string
	webhook bool
	// encoding labels an object for a read under crd at another version (as evaluate labels it
	// for the new CRD: the version it is encoded at).
	encoding string
	types    *preflight.TypeChecker
	prevs    sync.Pool // *preview.Previewer of crd, made only when a move needs a read
}

// newOwnersAtRewrite is the prediction for a rewrite at to (the new storage version) of live's
// objects on kube-apiserver kube, nil when none is needed or it cannot be made (then note says
// why, for the item's notes).
func newOwnersAtRewrite(live, next *apiextensionsv1.CustomResourceDefinition, to string, encodings []string, kube kubeversion.Version) (o *ownersAtRewrite, note string) {
	if live == nil || to == "" || !ownership.FailedUpdateDropsAll(kube) || !rewrites(live, next, to) {
		return nil, ""
	}
	crd := rewriteCRD(live, next, to)
	tc, err := preflight.NewTypeChecker(crd)
	if err != nil {
		return nil, fmt.Sprintf("which field managers the rewrite at %s drops was not evaluated: %v", to, err)
	}
	o = &ownersAtRewrite{crd: crd, group: crd.Spec.Group, to: to, types: tc,
		webhook: strategyOf(crd) == apiextensionsv1.WebhookConverter}
	for _, enc := range encodings {
		if _, err := crdinfo.Lookup(crd, enc); err == nil {
			o.encoding = enc
			break
		}
	}
	return o, ""
}

// rewrites reports whether the runbook writes every object at to: the storage version
// changes or status.storedVersions lists another (migrate, retire of a stored version), or a
// version the live CRD serves is removed or unserved (retire moves its entries).
func rewrites(live, next *apiextensionsv1.CustomResourceDefinition, to string) bool {
	if crdinfo.StorageVersion(live) != to || slices.ContainsFunc(live.Status.StoredVersions, func(v string) bool { return v != to }) {
		return true
	}
	for i := range live.Spec.Versions {
		if v, err := crdinfo.Lookup(next, live.Spec.Versions[i].Name); err != nil || !v.Served && live.Spec.Versions[i].Served {
			return true
		}
	}
	return false
}

// rewriteCRD is the CRD the runbook's rewrite at to writes under: live when it serves to and
// every version it has; else the intermediate CRD (Intermediate: next with live's versions it
// removes or stops serving kept, served), as the runbook applies it first.
func rewriteCRD(live, next *apiextensionsv1.CustomResourceDefinition, to string) *apiextensionsv1.CustomResourceDefinition {
	asLive := true
	for i := range live.Spec.Versions {
		asLive = asLive && live.Spec.Versions[i].Served
	}
	if v, err := crdinfo.Lookup(live, to); err != nil || !v.Served {
		asLive = false
	}
	if asLive {
		return live
	}
	var keep []string
	for i := range live.Spec.Versions {
		if v, err := crdinfo.Lookup(next, live.Spec.Versions[i].Name); err != nil || !v.Served {
			keep = append(keep, live.Spec.Versions[i].Name)
		}
	}
	return Intermediate(live, next, keep)
}

// concerns reports whether u's write at the rewrite's version can lose managers: only an
// object with an entry of another version (a memo's clean answer, which does not cover
// managedFields, is not reused for it).
func (o *ownersAtRewrite) concerns(u *unstructured.Unstructured) bool {
	return o != nil && ownership.NamesOtherVersion(u.GetManagedFields(), o.group, o.to)
}

// predict is what the rewrite of u (target: u read at the rewrite's version) does to its
// managers; nil when it keeps them all. p previews the write under the new CRD: the object the
// field manager converts is the one the API server decodes from the request, with the
// defaults of the version written (a default that a read of an object encoded at another
// version does not show: Flux's spec.provider at v1), made only when an entry is left.
func (o *ownersAtRewrite) predict(ctx context.Context, p *preview.Previewer, u *unstructured.Unstructured, target map[string]any) *ManagersLost {
	if !o.concerns(u) {
		return nil
	}
	var written map[string]any
	var writeErr error
	write := func() (map[string]any, error) {
		if written == nil && writeErr == nil {
			body, err := (&unstructured.Unstructured{Object: target}).MarshalJSON()
			if err != nil {
				return nil, err
			}
			ur, err := p.Update(ctx, body, body, preview.PreviewOptions{FieldValidation: preview.FieldValidationWarn})
			switch {
			case err != nil:
				writeErr = err
			case !ur.Accepted():
				writeErr = errRejected
			default:
				written = ur.Object
			}
		}
		return written, writeErr
	}
	entries := u.GetManagedFields()
	r := ownership.PredictRewrite(entries, o.group, o.to, target, func(v string) (map[string]any, bool) { return o.read(u, v) }, func(v string) (string, bool) { return o.fails(write, v) }, true)
	switch {
	case r.Unknown != "":
		return &ManagersLost{Unknown: r.Unknown}
	case len(r.Lost) == 0:
		return nil
	}
	lost, _ := preflight.LostManagers(r.Lost, nil)
	return &ManagersLost{Lost: lost, Reset: true, Because: r.Because}
}

// read is u read at version v under the rewrite's CRD, as the rewrite reads it to move an
// entry of v (migrate's readerAt: only a served version; through a conversion webhook plan
// has no answer).
func (o *ownersAtRewrite) read(u *unstructured.Unstructured, v string) (map[string]any, bool) {
	if lv, err := crdinfo.Lookup(o.crd, v); err != nil || !lv.Served || o.webhook || o.encoding == "" {
		return nil, false
	}
	p, _ := o.prevs.Get().(*preview.Previewer)
	if p == nil {
		var err error
		if p, err = preview.NewPreviewer(o.crd); err != nil {
			return nil, false
		}
	}
	defer o.prevs.Put(p)
	b, err := (&unstructured.Unstructured{Object: relabelled(u.Object, schema.GroupVersion{Group: o.group, Version: o.encoding}.String())}).MarshalJSON()
	if err != nil {
		return nil, false
	}
	rr, err := p.Read(b, v)
	if err != nil || !rr.Converted {
		return nil, false
	}
	return rr.Object, true
}

// errRejected: the rewrite's write is rejected (the rejected-write finding): it changes no
// field manager.
var errRejected = errors.New("rejected")

// fails says why the API server's field manager cannot convert the object written (write: the
// write previewed at the rewrite's version) to version v for an entry of v (known false: plan
// cannot tell).
func (o *ownersAtRewrite) fails(write func() (map[string]any, error), v string) (string, bool) {
	if _, err := crdinfo.Lookup(o.crd, v); err != nil {
		return fmt.Sprintf("an entry of %s is left, which is not a version of the CRD: the field manager cannot convert the object to it", v), true
	}
	if o.webhook {
		return fmt.Sprintf("an entry of %s is left: whether the object converted to %s by the conversion webhook fits %s's typed schema needs the webhook's answer", v, v, v), false
	}
	// With conversion None the object converts by its apiVersion; the field manager types it
	// as Check does (without AllowDuplicates, which only duplicate list items tell apart).
	written, err := write()
	switch {
	case errors.Is(err, errRejected):
		return "", true
	case err != nil:
		return fmt.Sprintf("the rewrite's write at %s could not be previewed: %v", o.to, err), false
	}
	if tm := o.types.Check(written, v); len(tm) > 0 {
		return fmt.Sprintf("an entry of %s is left, and the object written at %s does not fit %s's typed schema (%s)", v, o.to, v, tm[0].Error), true
	}
	return "", true
}
