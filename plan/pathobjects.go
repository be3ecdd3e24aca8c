package plan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/preview"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// The objects of a hop after the first, as the hops before it leave them: every live object
// is taken through each earlier hop as its upgrade takes it — read under that hop's CRD and
// stored at its storage version (converted by the conversion the hop's rewrite relies on,
// pruned and defaulted there: the consented losses are gone), managedFields entries of the
// versions the hop removes moved to its storage version (retire) — and then evaluated by the
// hop's plan like the live objects are by the first hop's. So each object is judged at every
// hop it goes through, before any write.

// ConvertFunc converts objects (as stored, at their apiVersion) with crd's conversion webhook
// to version to, as the API server does when the rewrite reads them there.
type ConvertFunc func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, objs []unstructured.Unstructured, to string) ([]unstructured.Unstructured, error)

// WebhookConvert is the ConvertFunc of a cluster: each CRD's webhook reached as convert
// reaches it (its URL, or the service through the API server's service proxy), every response
// checked as the API server checks it. An object the webhook does not convert is an error.
func WebhookConvert(c ReleaseClients, timeout time.Duration) ConvertFunc {
	return func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, objs []unstructured.Unstructured, to string) ([]unstructured.Unstructured, error) {
		if c.Kube == nil {
			return nil, fmt.Errorf("%s: converting objects needs its conversion webhook and no cluster is reached", crd.Name)
		}
		tr, err := webhookcheck.Transport(ctx, crd, nil, webhookcheck.Reach{Proxy: c.Kube.CoreV1().RESTClient(), Timeout: timeout})
		if err != nil {
			return nil, err
		}
		return convertWith(ctx, crd, tr, objs, to)
	}
}

// URLConvert is the ConvertFunc that reaches webhooks by their URL only (clientConfig.url,
// e.g. a webhook on 127.0.0.1 in a test), with no cluster.
func URLConvert(timeout time.Duration) ConvertFunc {
	return func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, objs []unstructured.Unstructured, to string) ([]unstructured.Unstructured, error) {
		tr, err := webhookcheck.Transport(ctx, crd, nil, webhookcheck.Reach{Timeout: timeout})
		if err != nil {
			return nil, err
		}
		return convertWith(ctx, crd, tr, objs, to)
	}
}

func convertWith(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, tr convert.Transport, objs []unstructured.Unstructured, to string) ([]unstructured.Unstructured, error) {
	in := make([]convert.Object, len(objs))
	for i := range objs {
		in[i] = convert.Object{Source: fmt.Sprint(i), Object: objs[i].Object}
	}
	got := map[string]map[string]any{}
	rep, err := convert.Run(ctx, convert.Options{CRD: crd, To: to, Transport: tr, Converted: func(source string, _, c map[string]any) { got[source] = c }}, in)
	if err != nil {
		return nil, err
	}
	if rep.Unreachable != "" {
		return nil, fmt.Errorf("%s: its conversion webhook does not answer: %s", crd.Name, rep.Unreachable)
	}
	out := make([]unstructured.Unstructured, len(objs))
	for i := range objs {
		c := got[fmt.Sprint(i)]
		if c == nil {
			why := "it did not convert it"
			for _, f := range rep.Findings {
				if f.Severity == "error" {
					why = f.Detail
					break
				}
			}
			return nil, fmt.Errorf("%s: its conversion webhook did not convert %s to %s: %s", crd.Name, objectWhere(&objs[i]), to, why)
		}
		out[i] = unstructured.Unstructured{Object: c}
	}
	return out, nil
}

func objectWhere(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// hopStep is one earlier hop an object goes through: from state (the CRD before it and the
// version objects are encoded at) to next.
type hopStep struct {
	from    pathState
	next    *apiextensionsv1.CustomResourceDefinition
	release string
	kube    kubeversion.Version
	conv    ConvertFunc
	p       *preview.Previewer
}

// advance takes a page of objects (at their apiVersion, as stored after the hop before)
// through the hop: the objects as its upgrade leaves them stored at next's storage version.
func (h *hopStep) advance(ctx context.Context, page []unstructured.Unstructured) ([]unstructured.Unstructured, error) {
	target := crdinfo.StorageVersion(h.next)
	if h.p == nil {
		p, err := preview.NewPreviewer(h.next, preview.WithKubeVersion(h.kube))
		if err != nil {
			return nil, err
		}
		h.p = p
	}
	group := h.next.Spec.Group
	// The converter the rewrite relies on (reach): the CRD before the hop when it has the
	// target version, else the hop's.
	conv := h.next
	if crdinfo.Has(h.from.crd, target) {
		conv = h.from.crd
	}
	webhook := strategyOf(conv) == apiextensionsv1.WebhookConverter
	var toConvert []int
	out := make([]unstructured.Unstructured, len(page))
	for i := range page {
		u := page[i].DeepCopy()
		if v := u.GroupVersionKind().Version; webhook && v != target {
			toConvert = append(toConvert, i)
		} else if !webhook {
			// Conversion None: the object stored at the encoded version, relabelled.
			enc := crdinfo.StorageVersion(h.from.crd)
			if !crdinfo.Has(h.next, enc) {
				enc = target
			}
			u.SetAPIVersion(schema.GroupVersion{Group: group, Version: enc}.String())
		}
		out[i] = *u
	}
	if len(toConvert) > 0 {
		if h.conv == nil {
			return nil, errNeedsWebhook
		}
		sub := make([]unstructured.Unstructured, len(toConvert))
		for j, i := range toConvert {
			sub[j] = out[i]
		}
		conved, err := h.conv(ctx, conv, sub, target)
		if err != nil {
			return nil, err
		}
		for j, i := range toConvert {
			out[i] = conved[j]
		}
	}
	for i := range out {
		u := &out[i]
		for _, read := range []string{u.GroupVersionKind().Version, target} {
			u.SetAPIVersion(schema.GroupVersion{Group: group, Version: read}.String())
			b, err := u.MarshalJSON()
			if err != nil {
				return nil, err
			}
			rr, err := h.p.Read(b, "")
			if err != nil {
				return nil, fmt.Errorf("%s: reading %s as release %s stores it: %w", h.next.Name, objectWhere(u), h.release, err)
			}
			u.Object = rr.Object
		}
		moveManagedFields(u, h.next, target)
	}
	return out, nil
}

// errNeedsWebhook: an earlier hop converts the objects through a conversion webhook and no
// ConvertFunc was given.
var errNeedsWebhook = errors.New("needs a conversion webhook")

// moveManagedFields relabels the managedFields entries of versions next no longer has to its
// storage version, as retire does before a version is removed.
func moveManagedFields(u *unstructured.Unstructured, next *apiextensionsv1.CustomResourceDefinition, target string) {
	mf := u.GetManagedFields()
	changed := false
	for i := range mf {
		gv, err := schema.ParseGroupVersion(mf[i].APIVersion)
		if err != nil || gv.Group != next.Spec.Group || crdinfo.Has(next, gv.Version) {
			continue
		}
		mf[i].APIVersion, changed = schema.GroupVersion{Group: gv.Group, Version: target}.String(), true
	}
	if changed {
		u.SetManagedFields(mf)
	}
}

// hopSource hands out base's objects as the steps (the hops before) leave them. When an
// earlier hop cannot be carried out on them here (its webhook does not convert them, a read
// fails), it ends there: failed says why, and the hop's plan counts the objects left
// unevaluated (an unknown, not an error: the hop's instruction says what to do first).
type hopSource struct {
	base   ObjectSource
	steps  []*hopStep
	failed error
}

func (s *hopSource) Next(ctx context.Context) ([]unstructured.Unstructured, error) {
	if s.failed != nil {
		return nil, io.EOF
	}
	page, err := s.base.Next(ctx)
	if err != nil {
		return nil, err
	}
	for _, st := range s.steps {
		if page, err = st.advance(ctx, page); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			s.failed = fmt.Errorf("release %s: %w", st.release, err)
			return nil, io.EOF
		}
	}
	return page, nil
}

func (s *hopSource) Total() int64 { return s.base.Total() }

// liveSource is a fresh source of a CRD's objects as they are now: listed from the cluster, or
// offline a copy of the objects o.Release.Sources holds in memory (nil when it holds none).
func liveSource(c ReleaseClients, o PathOptions, live *apiextensionsv1.CustomResourceDefinition) ObjectSource {
	if c.CRDs != nil {
		if v := ListVersion(live); v != "" && c.Dynamic != nil {
			return NewClusterSource(c.Dynamic, crdinfo.GVR(live, v), o.Release.ChunkSize)
		}
		return nil
	}
	for k, l := range o.Release.Live {
		if l != nil && l.Name == live.Name && k < len(o.Release.Sources) {
			if s, ok := o.Release.Sources[k].(*SliceSource); ok {
				return &SliceSource{Objects: s.Objects, PageSize: s.PageSize}
			}
		}
	}
	return nil
}

// laterHopSource is the source of a hop after the first for one CRD: its live objects taken
// through chain (the CRD's states before each earlier hop and the hop's CRD), or nil with the
// reason when they cannot be (no objects to take, a webhook no ConvertFunc reaches).
func laterHopSource(ctx context.Context, c ReleaseClients, o PathOptions, live *apiextensionsv1.CustomResourceDefinition, chain []hopStep) (ObjectSource, string) {
	base := liveSource(c, o, live)
	if base == nil {
		return nil, ""
	}
	s := &hopSource{base: base}
	for i := range chain {
		st := chain[i]
		st.kube, st.conv = o.Release.KubeVersion, o.Convert
		target := crdinfo.StorageVersion(st.next)
		conv := st.next
		if crdinfo.Has(st.from.crd, target) {
			conv = st.from.crd
		}
		if strategyOf(conv) == apiextensionsv1.WebhookConverter && o.Convert == nil && !slices.Equal(st.from.stored, []string{target}) {
			return nil, fmt.Sprintf("objects not evaluated at this hop: release %s converts them through %s and no cluster is reached to ask it", st.release, conversionText(conv))
		}
		s.steps = append(s.steps, &st)
	}
	return s, ""
}
