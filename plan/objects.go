package plan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/ownership"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/preview"
)

// evaluator evaluates live objects under the new CRD.
type evaluator struct {
	next *apiextensionsv1.CustomResourceDefinition
	// readVersion is the version reads and no-op updates use.
	readVersion string
	// encodings are the versions an object may be encoded at in etcd (the live
	// storedVersions still in the new CRD), the live storage version first.
	encodings []string
	// viaWebhook: objects reach the encodings through a conversion webhook, so an object
	// listed at one version cannot be relabelled to another: the live CRD converts through
	// one, or every object is first rewritten at the new storage version under an
	// intermediate CRD that converts through the new CRD's.
	viaWebhook bool
	// rewriteFirst: the new CRD has none of the versions objects are stored at, so they are
	// evaluated as the runbook's first rewrite stores them, at its storage version.
	rewriteFirst   bool
	fv             preview.FieldValidation
	readDeprecated bool
	// types types objects as the API server does for server-side apply (nil: not checked).
	types *preflight.TypeChecker
	// owners predicts the managers the rewrite drops (nil: none can be).
	owners *ownersAtRewrite
	// recreateAsRead: the served versions of the new CRD (other than readVersion) whose schema
	// or subresources differ from readVersion's, so that an object re-created as listed at one
	// of them may be judged otherwise than re-created as the new storage version holds it.
	recreateAsRead map[string]bool
	// liveSchemas are the live CRD's structural schemas of the encodings after the first (a
	// pending migration's other storedVersions; with conversion None): an object listed with a
	// field one of them prunes is not encoded at that version, since the API server's read of
	// an object prunes it with the schema of the version it is encoded at.
	liveSchemas map[string]*structuralschema.Structural
}

// objResult is one evaluated object.
type objResult struct {
	finding Finding
	err     error
	// ruledOut: an encoding was not evaluated because the object cannot be encoded at it
	// (notEncodedAt); such an object is not recorded as clean in the memo, whose rules do
	// not include the live CRD.
	ruledOut bool
}

var serverMetadata = []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}

// errorTexts words preview's errors as the API server does ("field: message").
func errorTexts(errs []preview.PreviewError) []string { return preview.ErrorTexts(errs) }

func (e *evaluator) evaluate(ctx context.Context, p *preview.Previewer, u *unstructured.Unstructured) objResult {
	f := Finding{Namespace: u.GetNamespace(), Name: u.GetName(), PrunedOnRead: []string{}, DefaultedOnRead: []string{}, CreateErrors: []string{}, UpdateErrors: []string{}}
	res := objResult{}
	group := e.next.Spec.Group
	listed := u.GroupVersionKind().Version
	where := u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		where = ns + "/" + where
	}

	// The next read: the object as stored in etcd, decoded under the new CRD. lossy is the
	// first read that prunes fields: the object as the new version holds it once the loss is
	// accepted (the primary read's, else another encoding's that possibly prunes).
	var primary, lossy *preview.ReadResult
	for i, enc := range e.encodings {
		if enc != listed && e.viaWebhook {
			if e.rewriteFirst {
				f.Notes = append(f.Notes, fmt.Sprintf("rewritten at %s through the conversion webhook before the apply: plan cannot tell what the webhook makes of it (kubectl crdver upgrade round-trips every object through it before its first write)", enc))
			} else {
				f.Notes = append(f.Notes, fmt.Sprintf("a migration is pending: the object may be encoded at %s in etcd, which the API cannot show; with a conversion webhook plan cannot tell what that copy holds", enc))
			}
			continue
		}
		if i > 0 && e.notEncodedAt(u, enc) {
			res.ruledOut = true
			continue
		}
		// Relabelled, not changed: a shallow copy with another apiVersion encodes the same.
		b, err := (&unstructured.Unstructured{Object: relabelled(u.Object, schema.GroupVersion{Group: group, Version: enc}.String())}).MarshalJSON()
		if err != nil {
			res.err = fmt.Errorf("%s: %w", where, err)
			return res
		}
		rr, err := p.Read(b, e.readVersion)
		if err != nil {
			res.err = fmt.Errorf("%s: reading it under the new CRD: %w", where, err)
			return res
		}
		if lossy == nil && len(rr.Pruned) > 0 && rr.Converted {
			lossy = rr
		}
		if primary == nil {
			primary = rr
			f.PrunedOnRead, f.DefaultedOnRead = rr.Pruned, rr.Defaulted
			if !rr.Converted {
				f.Notes = append(f.Notes, fmt.Sprintf("read at %s, its encoded version: converting it to %s needs the conversion webhook", rr.ReadVersion, e.readVersion))
			}
			continue
		}
		for _, path := range rr.Pruned {
			if !slices.Contains(primary.Pruned, path) && !slices.Contains(f.PossiblyPrunedOnRead, path) {
				f.PossiblyPrunedOnRead = append(f.PossiblyPrunedOnRead, path)
			}
		}
		if i > 0 && (!slices.Equal(rr.Pruned, primary.Pruned) || !slices.Equal(rr.Defaulted, primary.Defaulted)) {
			f.Notes = append(f.Notes, fmt.Sprintf("depends on the version the object is encoded at in etcd (a migration is pending; the API cannot show it): if %s, the read prunes [%s] and defaults [%s] instead",
				enc, strings.Join(rr.Pruned, ", "), strings.Join(rr.Defaulted, ", ")))
		}
	}
	if err := ctx.Err(); err != nil {
		res.err = err
		return res
	}

	// A controller's next write: the object as read, sent back unchanged.
	if primary != nil && primary.Converted {
		body, err := (&unstructured.Unstructured{Object: primary.Object}).MarshalJSON()
		if err != nil {
			res.err = err
			return res
		}
		ur, err := p.Update(ctx, body, body, preview.PreviewOptions{FieldValidation: preview.FieldValidationWarn})
		if err != nil {
			res.err = fmt.Errorf("%s: no-op update under the new CRD: %w", where, err)
			return res
		}
		if !ur.Accepted() {
			f.UpdateErrors = errorTexts(ur.Errors)
			f.Notes = differenceNotes(p, f.Notes, f.UpdateErrors)
		}
		warnings := ur.Warnings
		if e.readDeprecated && len(warnings) > 0 {
			warnings = warnings[1:] // the version's deprecation warning comes first
		}
		f.UpdateWarnings = warnings
	}

	// Server-side apply and field ownership: the object as read must fit the read version's
	// typed schema (a value stored under another type ratchets through validation, not
	// through typing).
	if primary != nil && primary.Converted && e.types != nil {
		if tm := e.types.Check(primary.Object, e.readVersion); len(tm) > 0 {
			f.TypeMismatches = tm
			hr, err := e.recreate(ctx, p, primary.Object, u.GetNamespace())
			if err != nil {
				res.err = fmt.Errorf("%s: re-create as read under the new CRD: %w", where, err)
				return res
			}
			if !hr.Accepted() {
				f.TypeRecreateErrors = errorTexts(hr.Errors)
			}
			// The runbook's fix-values patch for this object (every value converted) must be
			// a write the API server accepts: an update of the object as read with the
			// converted values, validated at the read version.
			if errs, err := e.convertedRejected(ctx, p, primary.Object, f.TypeMismatches); err != nil {
				res.err = fmt.Errorf("%s: update with the converted values under the new CRD: %w", where, err)
				return res
			} else if len(errs) > 0 {
				var paths []string
				for i := range f.TypeMismatches {
					paths = append(paths, f.TypeMismatches[i].Path)
					f.TypeMismatches[i].ConvertedErrors = errs
				}
				f.Notes = append(f.Notes, fmt.Sprintf("the values of %s convert, but %s rejects the object with them (%s): for you to fix",
					strings.Join(paths, ", "), e.readVersion, strings.Join(errs, "; ")))
			}
		}
	}

	// The rewrite's field managers (ownershiploss.go). Values that do not fit are the
	// type-mismatch finding's: its fix-values step converts them, keeping every manager.
	if primary != nil && primary.Converted && len(f.TypeMismatches) == 0 {
		f.ManagersLost = e.owners.predict(ctx, p, u, primary.Object)
	}

	// A re-create from a backup or a GitOps repository: the object as listed.
	createVersion := e.createVersionOf(listed)
	if createVersion != listed && e.viaWebhook {
		f.Notes = append(f.Notes, fmt.Sprintf("re-create not evaluated: %s is not served by the new CRD and converting the object needs the conversion webhook", listed))
	} else {
		c := relabelled(u.Object, schema.GroupVersion{Group: group, Version: createVersion}.String())
		cr, err := e.recreate(ctx, p, c, u.GetNamespace())
		if err != nil {
			res.err = fmt.Errorf("%s: re-create under the new CRD: %w", where, err)
			return res
		}
		if !cr.Accepted() {
			f.CreateErrors = errorTexts(cr.Errors)
			if createVersion == e.readVersion {
				// Re-created at the version the values are typed at: the type-mismatch finding's.
				f.CreateErrors = notAtMismatches(f.CreateErrors, f.TypeMismatches)
			}
			f.Notes = differenceNotes(p, f.Notes, f.CreateErrors)
		}
		// The object as the new storage version will hold it, once the migration has rewritten
		// it there: what a backup taken after the runbook holds, and what the runbook's verify
		// step (the plan of the same release, listing at that version) re-creates. Its re-create
		// may be rejected although the re-create as listed is not: listed at a version whose
		// schema still has the fields the object loses (judged once the loss is consented to),
		// or whose schema does not require what the read version's does (Cluster API's v1beta2
		// requires spec.controlPlane, v1beta1 does not). A value of another type is judged by
		// the typed check above (TypeRecreateErrors) and its fix-values step.
		asStored := lossy
		if asStored == nil && primary != nil && primary.Converted && len(f.TypeMismatches) == 0 && e.recreateAsRead[createVersion] {
			asStored = primary
		}
		if asStored != nil && (len(f.CreateErrors) == 0 || onlyUnknownFields(f.CreateErrors)) {
			hr, err := e.recreate(ctx, p, asStored.Object, u.GetNamespace())
			if err != nil {
				res.err = fmt.Errorf("%s: re-create under the new CRD as stored at %s: %w", where, e.readVersion, err)
				return res
			}
			if !hr.Accepted() {
				f.CreateErrorsAfterLoss = notAtMismatches(errorTexts(hr.Errors), f.TypeMismatches)
			}
		}
	}
	res.finding = f
	return res
}

// notEncodedAt reports whether the object as listed holds a field that the live CRD's schema
// of enc prunes: the API server prunes an object it reads from etcd with the schema of the
// version it is encoded at (and converts it, with conversion None, by relabelling), so an
// object encoded at enc could not have been listed with that field. Such a field is one
// written at the storage version after the migration began (e.g. a value given the new
// type: a map where enc's schema has a string), and the read plan would otherwise assume
// for enc is not one the object can have: it does not lose that field.
func (e *evaluator) notEncodedAt(u *unstructured.Unstructured, enc string) bool {
	s := e.liveSchemas[enc]
	if s == nil {
		return false
	}
	c := k8sruntime.DeepCopyJSON(u.Object)
	return len(structuralpruning.PruneWithOptions(c, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})) > 0
}

// convertedRejected previews the update --fix-values sends (obj as read with every mismatched
// value replaced by its converted value) and returns the API server's errors when it is
// rejected; nil when it is accepted or when not every value converts (the value is then for a
// person anyway). A rejected object's values are left unconverted (Converted cleared), so that
// the runbook gives it to a person, not to --fix-values, whose write would fail.
func (e *evaluator) convertedRejected(ctx context.Context, p *preview.Previewer, obj map[string]any, tm []preflight.TypeMismatch) ([]string, error) {
	patched := preflight.Converted(obj, tm)
	if patched == nil {
		return nil, nil
	}
	old, err := (&unstructured.Unstructured{Object: obj}).MarshalJSON()
	if err != nil {
		return nil, err
	}
	body, err := (&unstructured.Unstructured{Object: patched}).MarshalJSON()
	if err != nil {
		return nil, err
	}
	ur, err := p.Update(ctx, body, old, preview.PreviewOptions{FieldValidation: preview.FieldValidationWarn})
	if err != nil || ur.Accepted() {
		return nil, err
	}
	errs := errorTexts(ur.Errors)
	for i := range tm {
		tm[i].Converted = ""
	}
	return errs, nil
}

// recreate previews a create of obj under the new CRD as a user re-creates it (from a backup or
// a GitOps repository), in namespace ns: without the metadata the server sets. obj is not
// changed: the body is encoded from a copy of its top level and metadata without those fields
// (nothing below them changes, so nothing below is copied).
func (e *evaluator) recreate(ctx context.Context, p *preview.Previewer, obj map[string]any, ns string) (*preview.PreviewResult, error) {
	c := maps.Clone(obj)
	if md, ok := c["metadata"].(map[string]any); ok {
		md = maps.Clone(md)
		for _, k := range serverMetadata {
			delete(md, k)
		}
		c["metadata"] = md
	}
	body, err := (&unstructured.Unstructured{Object: c}).MarshalJSON()
	if err != nil {
		return nil, err
	}
	return p.Create(ctx, body, preview.PreviewOptions{FieldValidation: e.fv, Namespace: ns})
}

// relabelled is obj with apiVersion set to apiVersion, sharing everything else with obj.
func relabelled(obj map[string]any, apiVersion string) map[string]any {
	c := make(map[string]any, len(obj)+1)
	maps.Copy(c, obj)
	c["apiVersion"] = apiVersion
	return c
}

// judgedApart are the versions crd serves besides read whose schema or subresources differ
// from read's: a re-create at one of them may be answered otherwise than at read.
func judgedApart(crd *apiextensionsv1.CustomResourceDefinition, read string) map[string]bool {
	out := map[string]bool{}
	rv, err := crdinfo.Lookup(crd, read)
	if err != nil {
		return out
	}
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Served && v.Name != read && (!equality.Semantic.DeepEqual(v.Schema, rv.Schema) || !equality.Semantic.DeepEqual(v.Subresources, rv.Subresources)) {
			out[v.Name] = true
		}
	}
	return out
}

// createVersionOf is the version an object listed at listed is re-created at: that one, when
// the new CRD serves it, else the version reads use.
func (e *evaluator) createVersionOf(listed string) string {
	if v, err := crdinfo.Lookup(e.next, listed); err != nil || !v.Served {
		return e.readVersion
	}
	return listed
}

// evalOptions are what the object pass needs besides the evaluator.
type evalOptions struct {
	sample   int64
	workers  int
	progress *atomic.Int64
	// memo: what an earlier pass found clean is not evaluated again (reuse), and what this
	// pass finds clean is recorded (record); either may be nil.
	reuse  *memoReader
	record *memoWriter
	reused *atomic.Int64
	// maxFindings bounds the findings kept (0: DefaultMaxFindings); every one is tallied.
	maxFindings int
	// each is Options.Each.
	each func(*unstructured.Unstructured)
}

// objectsOutcome is the object pass's result.
type objectsOutcome struct {
	evaluated int64
	// findings are the first maxFindings findings; omitted counts the others; tally counts
	// them all.
	findings []Finding
	omitted  int64
	tally    objectTally
	// managers counts the objects' managedFields entries per version and manager.
	managers *ownership.Tally
}

// evaluateAll reads src page by page and evaluates each page's objects on a pool of workers
// (each with its own Previewer: it is not safe for concurrent use), keeping the list order.
// The next page is fetched while the current one is evaluated; memory holds two pages and
// at most maxFindings findings.
func (e *evaluator) evaluateAll(ctx context.Context, src ObjectSource, o evalOptions) (*objectsOutcome, error) {
	workers := o.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	prevs := make([]*preview.Previewer, workers)
	for i := range prevs {
		p, err := preview.NewPreviewer(e.next)
		if err != nil {
			return nil, err
		}
		prevs[i] = p
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type pageOrErr struct {
		items []unstructured.Unstructured
		err   error
	}
	pages := make(chan pageOrErr, 1)
	go func() {
		defer close(pages)
		for {
			items, err := src.Next(ctx)
			if err == io.EOF {
				return
			}
			select {
			case pages <- pageOrErr{items, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	out := &objectsOutcome{findings: []Finding{}, managers: ownership.NewTally(e.next.Spec.Group)}
	maxFindings := o.maxFindings
	if maxFindings <= 0 {
		maxFindings = DefaultMaxFindings
	}
	for pg := range pages {
		if pg.err != nil {
			return out, pg.err
		}
		items := pg.items
		if o.sample > 0 && out.evaluated+int64(len(items)) > o.sample {
			items = items[:o.sample-out.evaluated]
		}
		results := make([]objResult, len(items))
		// The memo's digests: recorded ones looked up in list order, this pass's computed by
		// the workers.
		var recorded, sums []string
		if o.reuse != nil || o.record != nil {
			sums = make([]string, len(items))
			if o.reuse != nil {
				recorded = make([]string, len(items))
				for i := range items {
					recorded[i] = o.reuse.lookup(objectKey(&items[i]))
				}
			}
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < workers && w < len(items); w++ {
			wg.Add(1)
			go func(p *preview.Previewer) {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= len(items) || ctx.Err() != nil {
						return
					}
					if sums != nil {
						sums[i] = contentDigest(&items[i], e.createVersionOf(items[i].GroupVersionKind().Version))
						if recorded != nil && recorded[i] != "" && recorded[i] == sums[i] && !e.owners.concerns(&items[i]) {
							// Evaluated clean by an earlier pass, unchanged since: the same answer.
							results[i] = objResult{finding: Finding{Namespace: items[i].GetNamespace(), Name: items[i].GetName()}}
							if o.reused != nil {
								o.reused.Add(1)
							}
							if o.progress != nil {
								o.progress.Add(1)
							}
							continue
						}
					}
					results[i] = e.evaluate(ctx, p, &items[i])
					if o.progress != nil {
						o.progress.Add(1)
					}
				}
			}(prevs[w])
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return out, err
		}
		for i := range results {
			r := &results[i]
			if r.err != nil {
				return out, r.err
			}
			out.evaluated++
			out.managers.Add(items[i].GetManagedFields())
			if o.each != nil {
				o.each(&items[i])
			}
			if !r.finding.empty() {
				out.tally.add(&r.finding)
				if len(out.findings) < maxFindings {
					out.findings = append(out.findings, r.finding)
				} else {
					out.omitted++
				}
			} else if o.record != nil && !r.ruledOut {
				o.record.add(objectKey(&items[i]), sums[i])
			}
		}
		if o.sample > 0 && out.evaluated >= o.sample {
			break
		}
	}
	return out, ctx.Err()
}

// ErrInterrupted is returned (wrapped) when the context is cancelled mid-way.
var ErrInterrupted = errors.New("interrupted")

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
