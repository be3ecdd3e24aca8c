package convert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// ViaAPIServerOptions configure a round trip through the API server instead of calling the
// webhook directly: for when there is no network path to the webhook.
type ViaAPIServerOptions struct {
	CRD    *apiextensionsv1.CustomResourceDefinition
	Client dynamic.Interface
	// Namespace for objects that have none (namespaced CRDs).
	Namespace string
	// To is the version the user asked for; through the API server only round trips via the
	// storage version can be made without writing, and the report says so when they differ.
	To string
	// Page is as in Options: each page's findings and failed objects, not kept in the report.
	Page func(PageResult) error
}

func (r *runner) noteTarget(to, storage string) {
	if to != "" && to != storage {
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("the target version %s is not the storage version (%s): through the API server, without writing anything, only round trips through the storage version can be checked", to, storage))
	}
}

// DryRunRoundTrip creates every object with a server-side dry run in its own version A. The
// API server converts it to the storage version S (calling the webhook), encodes it, decodes
// it and converts it back to A for the response: A → S → A with the API server's own checks.
// The response is diffed with the object as the API server would have stored it (pruned and
// defaulted in A). Nothing is written.
func DryRunRoundTrip(ctx context.Context, opts ViaAPIServerOptions, objects []Object) (*Report, error) {
	return DryRunRoundTripSource(ctx, opts, SliceSource(objects))
}

// DryRunRoundTripSource is DryRunRoundTrip over the objects of src, a page at a time. When
// ctx ends the run, the report of the pages done so far comes with ctx's error.
func DryRunRoundTripSource(ctx context.Context, opts ViaAPIServerOptions, src Source) (*Report, error) {
	crd := opts.CRD
	storage := crdinfo.StorageVersion(crd)
	r, err := newRunner(Options{CRD: crd, To: storage, RoundTrip: true, Page: opts.Page}, true)
	if err != nil {
		return nil, err
	}
	rep := r.report
	rep.Webhook = fmt.Sprintf("the API server (server-side dry-run create in each object's version, converted to the storage version %s and back)", storage)
	for {
		page, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if ctx.Err() != nil {
			return r.finishDryRun(opts.To, storage), ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		var failed []*item
		for i, o := range page {
			if err := ctx.Err(); err != nil {
				return r.finishDryRun(opts.To, storage), err
			}
			ok, skipped, err := r.dryRunCreate(ctx, opts, o, storage)
			if ctx.Err() != nil {
				return r.finishDryRun(opts.To, storage), ctx.Err()
			}
			if err != nil {
				return nil, err
			}
			rep.Objects++
			switch {
			case skipped:
				rep.Skipped++
			case ok:
				rep.Converted++
			default:
				failed = append(failed, &item{index: i, source: o.Source, orig: o.Object, failed: true})
			}
		}
		rep.FailedObjects += len(failed)
		if r.opts.Page == nil {
			for _, it := range failed {
				rep.Failed = append(rep.Failed, FailedObject{Source: it.source, Object: it.orig})
			}
		} else if err := r.flushPage(failed); err != nil {
			return nil, err
		}
	}
	return r.finishDryRun(opts.To, storage), nil
}

func (r *runner) finishDryRun(to, storage string) *Report {
	if r.report.Skipped > 0 {
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("%d object(s) at the storage version %s were not sent: a dry-run create in the storage version converts nothing", r.report.Skipped, storage))
	}
	r.noteTarget(to, storage)
	return r.finish()
}

// dryRunCreate round-trips one object through a server-side dry-run create; ok: nothing was
// lost; skipped: it is at the storage version. The error stops the run.
func (r *runner) dryRunCreate(ctx context.Context, opts ViaAPIServerOptions, o Object, storage string) (ok, skipped bool, err error) {
	crd := opts.CRD
	av, _ := o.Object["apiVersion"].(string)
	g, v, _ := strings.Cut(av, "/")
	if g != crd.Spec.Group || !r.hasVersion(v) {
		return false, false, fmt.Errorf("%s: apiVersion %q is not a version of %s (have: %s)", o.Source, av, crd.Name, r.joinAPIVersions())
	}
	if v == storage {
		return false, true, nil
	}
	expected := runtime.DeepCopyJSON(o.Object)
	r.schemas[v].pruneObject(expected, true)
	r.schemas[v].defaultObject(expected)
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(expected)}
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	ns := u.GetNamespace()
	if crd.Spec.Scope == apiextensionsv1.NamespaceScoped && ns == "" {
		ns = opts.Namespace
		u.SetNamespace(ns)
	}
	ri := r.resource(opts.Client, v, ns)
	dir := v + " -> " + storage + " -> " + v
	start := time.Now()
	got, err := ri.Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Ignore"})
	r.tally.latencies = append(r.tally.latencies, time.Since(start))
	r.requests++
	if err != nil {
		return false, false, r.apiserverError(o.Source, dir, err)
	}
	r.tally.pass(CheckAPIServer)
	return r.compareContent(o.Source, dir, expected, got.Object, r.hasStatusSubresource(v)), false, nil
}

// LiveRoundTrip reads the live objects in every served version (the API server converts
// them from the storage version, calling the webhook), then for each version W other than
// the storage version S updates each object with a server-side dry run in W (W → S → W) and
// diffs the response with what was read. Objects are listed in pages (sel.PageSize, at most
// sel.Limit per version), each page checked before the next is read. Nothing is written.
func LiveRoundTrip(ctx context.Context, opts ViaAPIServerOptions, sel Selection) (*Report, error) {
	crd := opts.CRD
	storage := crdinfo.StorageVersion(crd)
	r, err := newRunner(Options{CRD: crd, To: storage, RoundTrip: true}, true)
	if err != nil {
		return nil, err
	}
	rep := r.report
	rep.Webhook = fmt.Sprintf("the API server (GET in every served version, then a server-side dry-run update in each: W -> %s -> W)", storage)
	if sel.Namespace == "" {
		sel.Namespace = opts.Namespace
	}
	failed := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		src := NewClusterSource(opts.Client, crd, v.Name, sel)
		for {
			start := time.Now()
			page, err := src.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			r.tally.latencies = append(r.tally.latencies, time.Since(start))
			r.requests++
			if err != nil {
				if stop := r.apiserverError(fmt.Sprintf("list at %s", v.Name), storage+" -> "+v.Name, errors.Unwrap(err)); stop != nil {
					return nil, stop
				}
				break
			}
			r.tally.pass(CheckAPIServer)
			if v.Name == storage {
				continue
			}
			for _, o := range page {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				read := &unstructured.Unstructured{Object: o.Object}
				key := read.GetNamespace() + "/" + read.GetName()
				dir := v.Name + " -> " + storage + " -> " + v.Name
				start := time.Now()
				got, err := r.resource(opts.Client, v.Name, read.GetNamespace()).Update(ctx, read.DeepCopy(), metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Ignore"})
				r.tally.latencies = append(r.tally.latencies, time.Since(start))
				r.requests++
				if err != nil {
					if stop := r.apiserverError(key, dir, err); stop != nil {
						return nil, stop
					}
					failed[key] = true
					continue
				}
				r.tally.pass(CheckAPIServer)
				if !r.compareContent(key, dir, read.Object, got.Object, false) {
					failed[key] = true
				}
			}
		}
		// Each version lists the same objects (less those created or deleted meanwhile).
		rep.Objects = max(rep.Objects, src.Read())
	}
	r.noteTarget(opts.To, storage)
	rep.Converted = max(rep.Objects-len(failed), 0)
	keys := make([]string, 0, len(failed))
	for k := range failed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rep.Failed = append(rep.Failed, FailedObject{Source: k})
	}
	rep.FailedObjects = len(rep.Failed)
	return r.finish(), nil
}

func (r *runner) resource(c dynamic.Interface, version, ns string) dynamic.ResourceInterface {
	gvr := crdinfo.GVR(r.crd, version)
	if r.crd.Spec.Scope == apiextensionsv1.ClusterScoped {
		return c.Resource(gvr)
	}
	return c.Resource(gvr).Namespace(ns)
}

func (r *runner) hasStatusSubresource(v string) bool {
	ver, ok := r.versionOf(v)
	return ok && ver.Subresources != nil && ver.Subresources.Status != nil
}

// apiserverError records a failed API server call as a finding (a conversion failure comes
// back as an API status: 500 with the webhook's error, 422 when the result is invalid).
// Errors that are not about the object (forbidden, unauthorized, the server unreachable)
// are returned: they stop the run.
func (r *runner) apiserverError(object, dir string, err error) error {
	s, isStatus := err.(apierrors.APIStatus)
	if !isStatus || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return fmt.Errorf("%s: %w", object, err)
	}
	r.tally.fail(Finding{Object: object, Direction: dir, Check: CheckAPIServer, Detail: s.Status().Message})
	return nil
}

// compareContent diffs two versions of the same object in the same version, ignoring the
// metadata the API server sets itself (only labels and annotations are compared) and, with
// dropStatus, .status (dropped on create when the status subresource is on). It reports
// whether nothing was lost: what came back added or normalised is reported, not a loss.
func (r *runner) compareContent(object, dir string, want, got map[string]any, dropStatus bool) bool {
	a, b := contentOf(want, dropStatus), contentOf(got, dropStatus)
	return r.tally.roundTrip(object, dir, Diff(a, b)) == 0
}

func contentOf(obj map[string]any, dropStatus bool) map[string]any {
	out := map[string]any{}
	for k, v := range obj {
		if k == "metadata" || (dropStatus && k == "status") {
			continue
		}
		out[k] = v
	}
	meta, _ := obj["metadata"].(map[string]any)
	m := map[string]any{}
	for _, k := range []string{"labels", "annotations"} {
		if v, ok := meta[k]; ok {
			m[k] = v
		}
	}
	out["metadata"] = m
	return out
}

func (r *runner) finish() *Report {
	r.report.Requests = r.requests
	r.report.Checks = r.tally.checks()
	r.report.Findings = append(r.report.Findings, r.tally.findings...)
	r.report.Added = append(r.report.Added, r.tally.added...)
	r.report.AddedObjects = r.tally.addedObjects
	r.report.Latency = latencySummary(r.tally.latencies)
	return r.report
}
