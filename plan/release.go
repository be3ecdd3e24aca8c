package plan

import (
	"context"
	"fmt"
	"sync/atomic"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/kubeversion"
)

// ReleaseClients reach the cluster a release is planned against. CRDs nil: offline
// (ReleaseOptions.Live and Sources give the CRDs as they are and their objects).
type ReleaseClients struct {
	CRDs    apiextensionsclient.Interface
	Dynamic dynamic.Interface
	// Kube asks the SelfSubjectAccessReviews of the server-side dry-run (nil: no dry-run).
	Kube kubernetes.Interface
}

// ReleaseOptions say what to plan and how.
type ReleaseOptions struct {
	// Next are the release's CRDs.
	Next []*apiextensionsv1.CustomResourceDefinition
	// Live and Sources, offline (ReleaseClients.CRDs nil): Live[i] is Next[i]'s CRD as it is
	// now (nil: a create), Sources[i] its objects (nil: not evaluated).
	Live    []*apiextensionsv1.CustomResourceDefinition
	Sources []ObjectSource
	// KubeVersion is the Kubernetes version the release is judged as (the cluster's, or
	// --kube-version); zero: whatever the process emulates.
	KubeVersion kubeversion.Version
	// ServerDryRun: when live, the apply verdict of each CRD is the API server's answer to a
	// server-side dry-run create or update, where the user may create or update it (else
	// computed offline). Leave it off when KubeVersion is not the server's.
	ServerDryRun bool
	// ChunkSize of the object lists (0: 500).
	ChunkSize int64
	// Plan is the template of each CRD's Options (FieldValidation, Sample, Workers, Memo, …);
	// Release sets KubeVersion, DryRun, Progress and ApplyFile.
	Plan Options
	// Conversion says how the conversion each new CRD relies on is judged (Plan.Conversion's
	// template; Release sets the clients from c and the progress).
	Conversion ConversionOptions
	// Objects are the release's documents that are not CRDs, of the WebhookKinds: the
	// runbook names those that make a conversion webhook the CRDs rely on.
	Objects []ReleaseObject
	// EachObject, when set, is given every live object of each CRD as plan reads it (Options.Each).
	EachObject func(crd string, u *unstructured.Unstructured)
	// OnConvert is called when the stored objects of a CRD are round-tripped through its
	// conversion (progress); the function it returns is called when done.
	OnConvert func(crd string, done *atomic.Int64, total int64) func()
	// OnEvaluate is called when the objects of a CRD are evaluated (progress); the function it
	// returns is called when done.
	OnEvaluate func(crd string, done *atomic.Int64, total func() int64) func()
	// Runbook names the files in the runbook's commands.
	Runbook RunbookOptions
}

// Release plans a release: each CRD of Next with its live copy and every live object (Plan),
// judged as KubeVersion, and the release runbook. It is `kubectl crdver plan` and the plan of
// `kubectl crdver upgrade`. On an error it returns the items planned so far (no runbook:
// it would leave CRDs out) with the error.
func Release(ctx context.Context, c ReleaseClients, o ReleaseOptions) (*Report, error) {
	chunk := o.ChunkSize
	if chunk <= 0 {
		chunk = 500
	}
	rep := &Report{Items: []Item{}, Runbook: []RunbookStep{}}
	if !o.KubeVersion.IsZero() {
		rep.KubernetesVersion = kubeversion.Effective(o.KubeVersion).String()
	}
	for i, next := range o.Next {
		var live *apiextensionsv1.CustomResourceDefinition
		var src ObjectSource
		if c.CRDs == nil {
			if i < len(o.Live) {
				live = o.Live[i]
			}
			if i < len(o.Sources) {
				src = o.Sources[i]
			}
		} else {
			l, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, next.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return rep, fmt.Errorf("getting CustomResourceDefinition %q: %w", next.Name, err)
			default:
				live = l
				if v := ListVersion(live); v != "" && c.Dynamic != nil {
					src = NewClusterSource(c.Dynamic, crdinfo.GVR(live, v), chunk)
				}
			}
		}
		opts := o.Plan
		opts.KubeVersion = o.KubeVersion
		opts.ApplyFile = o.Runbook.ApplyFile
		var done atomic.Int64
		opts.Progress = &done
		if o.ServerDryRun && c.CRDs != nil {
			dr, err := dryRunClient(ctx, c, live, next.Name)
			if err != nil {
				return rep, err
			}
			opts.DryRun = dr
		}
		if o.EachObject != nil {
			name := next.Name
			opts.Each = func(u *unstructured.Unstructured) { o.EachObject(name, u) }
		}
		opts.Conversion = o.Conversion
		opts.Conversion.Dynamic, opts.Conversion.Kube = c.Dynamic, c.Kube
		if opts.Conversion.ChunkSize <= 0 {
			opts.Conversion.ChunkSize = chunk
		}
		var converted atomic.Int64
		opts.Conversion.Progress = &converted
		if o.OnConvert != nil {
			opts.Conversion.Start = func(crd string, total int64) func() { return o.OnConvert(crd, &converted, total) }
		}
		stop := func() {}
		if o.OnEvaluate != nil && src != nil {
			stop = o.OnEvaluate(next.Name, &done, src.Total)
		}
		it, err := Plan(ctx, live, next, src, opts)
		stop()
		if it != nil {
			if cc := it.ConversionCheck; cc != nil && cc.Breaks() {
				if cc.Release = findReleaseWebhook(next, o.Objects); cc.Release != nil {
					it.Steps = itemSteps(Runbook([]Item{*it}, RunbookOptions{ApplyFile: o.Runbook.ApplyFile}))
				}
			}
			rep.Items = append(rep.Items, *it)
		}
		if err != nil {
			return rep, fmt.Errorf("planning %s: %w", next.Name, err)
		}
	}
	if c.Dynamic != nil && needGitOpsSources(rep.Items) {
		var notes []string
		o.Runbook.GitOps, notes = FindGitOpsSources(ctx, c.Dynamic)
		for i := range rep.Items {
			if p := analyse(&rep.Items[i]); p.live != nil && writersToChange(p) != "" {
				rep.Items[i].Notes = append(rep.Items[i].Notes, notes...)
				rep.Items[i].Steps = itemSteps(Runbook(rep.Items[i:i+1], RunbookOptions{ApplyFile: o.Runbook.ApplyFile, GitOps: o.Runbook.GitOps}))
			}
		}
	}
	rep.Runbook = Runbook(rep.Items, o.Runbook)
	return rep, nil
}

// dryRunClient is the CRD client for a server-side dry-run of the apply when the user may
// create (live == nil) or update the CRD (a SelfSubjectAccessReview), else nil: the verdict
// is then computed offline. A dry-run writes nothing.
func dryRunClient(ctx context.Context, c ReleaseClients, live *apiextensionsv1.CustomResourceDefinition, name string) (apiextensionsclient.Interface, error) {
	if c.Kube == nil {
		return nil, nil
	}
	attr := &authorizationv1.ResourceAttributes{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verb: "update", Name: name}
	if live == nil {
		attr.Verb, attr.Name = "create", ""
	}
	review, err := c.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
		&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attr}}, metav1.CreateOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", ErrInterrupted, ctx.Err())
		}
		return nil, nil // no answer: offline
	}
	if !review.Status.Allowed {
		return nil, nil
	}
	return c.CRDs, nil
}
