// Package restore puts back, from an upgrade's backup file, the objects and fields the upgrade
// dropped with consent, onto the CRDs in place now.
//
// The backup (upgrade's backup step) holds every object at every version that held its data,
// one YAML document per object and version, at versions the live CRDs may no longer serve.
// For each backup document, Run:
//
//  1. finds the live CRD of its group and kind and a served version to write it at: with
//     conversion None, the object is relabelled to each served version and the API server's
//     own create path (preview: pruning in that version and in the storage version, defaults)
//     says what that version keeps, judged by convert's loss rule (convert.Losses: a field the
//     version's own defaults add is not the backup's data; one it reads back at the backup's
//     value is kept); the version that keeps the most wins (the storage version, then
//     priority order, on a tie). With a webhook, the backup's own version when it is still
//     served (the API server converts through the webhook); otherwise the object is converted
//     to a served version (the storage version first) by the CRD's own webhook, and back,
//     through convert (convert.Run: the API server's checks of every answer, the same loss
//     rule): what the round trip does not give back is not held;
//  2. reads the live object at that version and compares every field of the backup (spec and
//     every other top-level field but status, each label and annotation) with it: a field
//     missing live is restored; a field with the same value is unchanged; a field with
//     another value changed since the backup: a conflict, left alone (the whole object is left
//     alone) unless Force;
//  3. sends the write (a JSON merge patch of the restored fields with the live
//     resourceVersion, as field manager FieldManager: no other manager's managedFields entry
//     is touched) first as a server-side dry run, checks that the server's answer holds every
//     restored field, and then (unless DryRun) for real;
//  4. an object deleted since the backup is re-created only when Recreate is set.
//
// Field ownership: the dry run of each write returns the object's managedFields as the write
// leaves them. A manager the live object has and the dry run's answer lacks (the API server
// could not type the object at the version written and reset them, or an overwritten field was
// a manager's last) is listed per object (LostManagers), and Run stops before its first write
// (*OwnershipLossError) unless AllowOwnershipLoss. With consent, the write pass writes an
// object only when its dry run drops no manager the first pass did not list.
//
// Requests: the write pass sends the very write the dry-run pass checked (its merge patch
// carries the resourceVersion the object had then) while the object, its CRD and the cluster's
// admission webhooks, policies and bindings are unchanged, so a restored object costs a GET, a
// dry-run PATCH and a PATCH; an object changed since its dry run (the API server refuses the
// patch: 409), or whose CRD or the admission configuration changed, is read, compared and
// dry-run again first, as in the first pass.
//
// Fields no served version can hold are reported by path (NotHeld), never dropped silently.
// Memory holds one backup document at a time (with Options.Each; otherwise plus a short outcome
// per document).
package restore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/manifest"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/preview"
)

// FieldManager is the default field manager of the restore's writes.
const FieldManager = "kubectl-crdver-restore"

// Outcome states.
const (
	StateRestored  = "restored"
	StateRecreated = "re-created"
	StateUnchanged = "unchanged"
	StateConflict  = "conflict"
	StateMissing   = "missing"
	StateNotHeld   = "cannot hold fields"
	StateFailed    = "failed"
)

// ErrNotConfirmed: Confirm said no; nothing was written.
var ErrNotConfirmed = errors.New("not confirmed")

// Options of a restore.
type Options struct {
	// Files are the backup files (as manifest.EachDocument reads them); Stdin is what "-" reads.
	Files []string
	Stdin io.Reader
	// DryRun sends every write as a server-side dry run only.
	DryRun bool
	// Force overwrites fields whose live value changed since the backup.
	Force bool
	// Recreate re-creates objects deleted since the backup.
	Recreate bool
	// FieldManager of the writes ("" is FieldManager).
	FieldManager string
	// Confirm is asked after the dry-run pass, before the first write (not with DryRun);
	// nil means yes.
	Confirm func(*Report) (bool, error)
	// OnObject is called after each backup document (progress).
	OnObject func(Outcome)
	// OnTotal, when set, is called once before the first pass with the number of documents
	// each pass goes through, as the closing lines of the backup files say (-1: unknown).
	OnTotal func(documents int64)
	// Each, when set, is given every outcome as it is known, with the report of its pass (the
	// dry run's, then the write pass's: Report.DryRun says which); the reports then keep none
	// of them but count them (Documents, Counts, Incomplete, NotHeldObjects, LostOwnership;
	// OwnershipLosses keeps the first 1,000), so that memory is bounded by one backup document
	// whatever the size of the backup. An error of Each stops the run.
	Each func(pass *Report, o Outcome) error
	// AnyCluster restores a backup whose first line names another cluster than the one reached
	// (by default refused: *OtherClusterError).
	AnyCluster bool
	// AllowOwnershipLoss writes even when the dry run of a write drops field managers (the
	// objects' LostManagers); without it Run returns *OwnershipLossError before the first write.
	AllowOwnershipLoss bool
	// Concurrency is how many backup documents are restored at once, each object's documents
	// one after another (0: DefaultConcurrency). Either way the outcomes come in backup order.
	Concurrency int
}

// DefaultConcurrency is how many backup documents a restore works on at once by default.
const DefaultConcurrency = 4

// OwnershipLossError: the dry runs of the writes drop field managers of these objects and
// AllowOwnershipLoss was not given; nothing was written.
type OwnershipLossError struct {
	Objects []Outcome
	// Count is the number of such objects (Objects may name only the first of them); 0: as many
	// as Objects.
	Count int
}

func (e *OwnershipLossError) Error() string {
	var names []string
	for _, o := range e.Objects {
		names = append(names, o.key())
	}
	n := max(e.Count, len(e.Objects))
	if len(names) > 3 {
		names = append(names[:3], fmt.Sprintf("… (%d in all)", n))
	}
	return fmt.Sprintf("the restore's writes would drop the field managers (managedFields entries) of %d object(s): %s", n, strings.Join(names, ", "))
}

// Report is what a restore found and did. Its JSON form is `kubectl crdver restore -o json`.
type Report struct {
	// DryRun: every write was a server-side dry run (nothing changed).
	DryRun bool `json:"dryRun"`
	// Objects are the backup's documents (one per object and backed-up version), in file order.
	Objects []Outcome `json:"objects"`
	// Counts per state.
	Counts map[string]int `json:"counts"`

	// Documents counts the backup's documents (len(Objects) when they are kept).
	Documents int `json:"-"`
	// NotHeldObjects counts the outcomes with fields no served version holds, LostOwnership
	// those whose writes drop field managers.
	NotHeldObjects, LostOwnership int `json:"-"`
	// Notes say how the backup was read (a pipe copied to a temporary file).
	Notes      []string `json:"-"`
	incomplete int
	// losses are the first ownership losses, when the outcomes are not kept (Options.Each).
	losses []Outcome
}

// Outcome is what became of one backup document.
type Outcome struct {
	// APIVersion is the backup document's (the version it was backed up at).
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	CRD        string `json:"crd,omitempty"`
	// Version is the served version the object was compared and written at.
	Version string `json:"version,omitempty"`
	State   string `json:"state"`
	// Restored are the fields written back (all of them for a re-created object).
	Restored []string `json:"restored"`
	// Overwritten are fields whose live value changed since the backup, overwritten (Force).
	Overwritten []string `json:"overwritten"`
	// Conflicts are fields whose live value differs from the backup's.
	Conflicts []string `json:"conflicts"`
	// NotHeld are fields of the backup no served version of the live CRD holds.
	NotHeld []string `json:"notHeld"`
	// Defaults are fields of the backup no served version holds whose value is the default
	// the live CRD's schema of the backup's version gives them (the API server put them there
	// when the backup read the object): not data the object had; not written, not lost.
	Defaults []string `json:"defaults,omitempty"`
	// Reason says why, for conflict, missing, failed and cannot-hold.
	Reason string `json:"reason,omitempty"`
	// LostManagers are the managedFields entries the object has and its write (as the API
	// server's dry run of it answers, and then the write itself) drops: "manager (Operation at
	// apiVersion)"; ManagersReset when the written object has none at all.
	LostManagers  []string `json:"lostManagers,omitempty"`
	ManagersReset bool     `json:"managersReset,omitempty"`
}

// key names the outcome's object and the version it is written at.
func (o Outcome) key() string {
	n := strings.ToLower(o.Kind) + " " + o.Name
	if o.Namespace != "" {
		n = strings.ToLower(o.Kind) + " " + o.Namespace + "/" + o.Name
	}
	return n
}

// OwnershipLosses are the outcomes whose writes drop field managers (the first 1,000 when the
// outcomes went to Options.Each: LostOwnership counts them all).
func (r *Report) OwnershipLosses() []Outcome {
	out := append([]Outcome(nil), r.losses...)
	for _, o := range r.Objects {
		if len(o.LostManagers) > 0 {
			out = append(out, o)
		}
	}
	return out
}

// Incomplete: something of the backup is not in the cluster after this outcome.
func (o Outcome) Incomplete() bool {
	switch o.State {
	case StateConflict, StateMissing, StateFailed, StateNotHeld:
		return true
	}
	return len(o.NotHeld) > 0
}

// Incomplete counts the outcomes that leave something of the backup out of the cluster.
func (r *Report) Incomplete() int { return r.incomplete }

// Writes counts the objects the pass restores or re-creates (none: nothing to write).
func (r *Report) Writes() int { return r.Counts[StateRestored] + r.Counts[StateRecreated] }

// Run restores the backup: a dry-run pass over the whole file, Confirm, then (unless DryRun)
// the pass that writes. The report is the last pass's. The backup is read a document at a
// time by each pass; stdin and pipes, which can be read only once, are copied to a temporary
// file first (removed at the end).
func Run(ctx context.Context, c *migrate.Clients, o Options) (*Report, error) {
	if o.FieldManager == "" {
		o.FieldManager = FieldManager
	}
	if o.Concurrency < 1 {
		o.Concurrency = DefaultConcurrency
	}
	in, err := spool(ctx, o.Files, o.Stdin)
	defer in.close()
	if err != nil {
		return nil, err
	}
	o.Files, o.Stdin = in.files, nil
	if !o.AnyCluster {
		if err := checkClusters(o.Files, c.ClusterID(ctx)); err != nil {
			var oc *OtherClusterError
			if errors.As(err, &oc) {
				oc.File = in.name(oc.File) // stdin, not its copy
			}
			return nil, err
		}
	}
	if o.OnTotal != nil {
		o.OnTotal(backupDocuments(o.Files))
	}
	r := &runner{c: c, o: o, crds: map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition{}}
	defer r.consent.close()
	if err := r.loadCRDs(ctx); err != nil {
		return nil, err
	}
	if !o.DryRun {
		// What the dry-run pass's checks ran under; the write pass sends them as they are only
		// when it is the same then (changedCRDs).
		r.admission = preflight.ReadAdmission(ctx, c.Dynamic, nil)
	}
	rep, err := r.pass(ctx, true)
	notes := func(rep *Report) *Report {
		if rep != nil {
			for _, n := range in.copied {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s was copied to a temporary file (removed since), for the restore reads the backup twice", n))
			}
			rep.Notes = append(rep.Notes, r.notes...)
		}
		return rep
	}
	if err != nil || o.DryRun {
		return notes(rep), err
	}
	if rep.LostOwnership > 0 {
		if !o.AllowOwnershipLoss {
			return notes(rep), &OwnershipLossError{Objects: rep.OwnershipLosses(), Count: rep.LostOwnership}
		}
	}
	if o.Confirm != nil {
		ok, err := o.Confirm(rep)
		if err != nil {
			return notes(rep), err
		}
		if !ok {
			return notes(rep), ErrNotConfirmed
		}
	}
	// The consent is to the losses the dry run recorded (in backup order), and the writes it
	// checked are sent as they are while their CRDs are unchanged.
	if err := r.consent.rewind(); err != nil {
		return notes(rep), err
	}
	if err := r.changedCRDs(ctx); err != nil {
		return notes(rep), err
	}
	rep, err = r.pass(ctx, false)
	return notes(rep), err
}

// changedCRDs reads the cluster's CRDs and its admission configuration again, before the
// write pass: the writes the dry run checked are sent as they are only for CRDs still as they
// were (the same resourceVersion), and only while the webhooks, admission policies and their
// bindings are the ones the dry runs went through (a webhook added between the passes may
// refuse or change a write, and drop what the consent did not cover). Otherwise each object
// is read, compared and dry-run again before its write, as in the first pass.
func (r *runner) changedCRDs(ctx context.Context) error {
	list, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing CustomResourceDefinitions: %w", err)
	}
	now := map[string]string{}
	for i := range list.Items {
		now[list.Items[i].Name] = list.Items[i].ResourceVersion
	}
	adm := preflight.ReadAdmission(ctx, r.c.Dynamic, nil)
	all := false
	switch {
	case !adm.OK || !r.admission.OK:
		all = true
		r.notes = append(r.notes, "the cluster's admission webhooks and policies could not be read, so every object's write was dry-run again just before it was sent")
	case adm.Fingerprint != r.admission.Fingerprint:
		all = true
		r.notes = append(r.notes, "the cluster's admission webhooks, policies or bindings changed between the dry-run pass and the writes, so every object's write was dry-run again just before it was sent")
	}
	r.changed = map[string]bool{}
	for _, crd := range r.crds {
		if all || now[crd.Name] != crd.ResourceVersion {
			r.changed[crd.Name] = true
		}
	}
	return nil
}

type runner struct {
	c    *migrate.Clients
	o    Options
	crds map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition
	// consent holds the managers each object's write may drop (by backup document), as the
	// dry-run pass listed them and AllowOwnershipLoss accepted, and the writes it checked.
	consent *consentLog
	// The document at hand (each document's worker has its own copy of the runner): its index
	// in the pass, what the dry-run pass recorded for it (write pass), the write its dry run
	// checked (dry-run pass, before a write pass, for the log), and its worker (whose
	// Previewers it uses: a Previewer is not safe for concurrent use).
	doc     int
	entry   *consentEntry
	planned *plannedWrite
	w       *preview.Worker
	// changed names the CRDs changed since the dry-run pass (write pass); every CRD when the
	// admission configuration (read before that pass: admission) changed.
	changed   map[string]bool
	admission preflight.Admission
	// notes are said at the end (Report.Notes).
	notes []string
}

// loadCRDs lists the cluster's CRDs once.
func (r *runner) loadCRDs(ctx context.Context) error {
	list, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing CustomResourceDefinitions: %w", err)
	}
	for i := range list.Items {
		crd := &list.Items[i]
		r.crds[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd
	}
	return nil
}

// docJob is one backup document of a pass, for a worker: its index in the pass, the object,
// and (write pass) what the dry-run pass recorded for it.
type docJob struct {
	doc   int
	obj   *unstructured.Unstructured
	entry *consentEntry
}

// docResult is what became of a docJob: the outcome, the write its dry run checked (dry-run
// pass, for the log), or the error that stops the run.
type docResult struct {
	doc     int
	out     Outcome
	planned *plannedWrite
	err     error
	skipped bool // not started: the run was stopping
}

// pass restores (dry: dry-runs) every document of the backup on Options.Concurrency workers:
// each object's documents one after another in backup order, the outcomes handed on
// (report, consent log, OnObject, Each) in backup order. The backup is read in order and a
// window of a few documents per worker is in flight, so memory holds that window whatever the
// backup's size. The first error of a document (the cluster unreachable, the credentials
// refused, Ctrl-C) stops the run: no document starts after it, the documents already written
// are reported, and it is returned.
func (r *runner) pass(ctx context.Context, dry bool) (*Report, error) {
	rep := &Report{DryRun: dry, Objects: []Outcome{}, Counts: map[string]int{}}
	if dry {
		r.consent = &consentLog{}
	}
	wctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var failed error // the first document's error, in backup order (set by deliver)
	// The pool never stops a job itself (its context is never cancelled): wctx does, through
	// the documents' requests, so that every document that was written is delivered, Ctrl-C or
	// not (a write in flight is never cut short: migrate.WriteContext).
	pool := preview.NewPool(context.WithoutCancel(ctx), r.o.Concurrency, func(_ context.Context, w *preview.Worker, j docJob) docResult {
		if wctx.Err() != nil {
			return docResult{skipped: true}
		}
		jr := *r // this document's: its worker's previewers, its index, its entry
		jr.w, jr.doc, jr.entry, jr.planned = w, j.doc, j.entry, nil
		out, err := jr.one(wctx, j.obj, dry)
		return docResult{doc: j.doc, out: out, planned: jr.planned, err: err}
	}, func(res docResult) error {
		switch {
		case res.skipped:
			return nil
		case res.err != nil:
			if failed == nil {
				failed = res.err
				stop(res.err)
			}
			return nil
		}
		return r.deliver(rep, res, dry)
	})
	doc := 0
	err := manifest.EachDocument(ctx, r.o.Files, manifest.Options{Stdin: r.o.Stdin}, func(d manifest.Document) error {
		if wctx.Err() != nil {
			return context.Cause(wctx) // Ctrl-C, or a document's error: stop before the next
		}
		doc++
		if d.Kind == "" || d.APIVersion == "" {
			return nil
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(d.JSON); err != nil {
			return &manifest.InputError{Err: fmt.Errorf("%s: not an object: %w", d.Where(), err)}
		}
		j := docJob{doc: doc, obj: u}
		if !dry {
			j.entry = r.consent.entry(doc, u.GetAPIVersion()+" "+Outcome{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}.key())
		}
		gk := u.GroupVersionKind().GroupKind()
		return pool.SubmitKeyed(gk.String()+"/"+objectKey(u), j)
	})
	werr := pool.Wait()
	switch {
	case failed != nil:
		return rep, failed
	case err != nil:
		return rep, err
	}
	return rep, werr
}

// deliver hands on one document's outcome, in backup order: the report, the consent log (the
// dry-run pass before a write pass), OnObject and Each.
func (r *runner) deliver(rep *Report, res docResult, dry bool) error {
	out := res.out
	rep.add(out, r.o.Each == nil)
	if dry && !r.o.DryRun {
		var consented []string
		if len(out.LostManagers) > 0 && r.o.AllowOwnershipLoss {
			consented = out.LostManagers
		}
		if consented != nil || res.planned != nil {
			if err := r.consent.record(res.doc, out.APIVersion+" "+out.key(), consented, res.planned); err != nil {
				return err
			}
		}
	}
	if r.o.OnObject != nil {
		r.o.OnObject(out)
	}
	if r.o.Each != nil {
		return r.o.Each(rep, out)
	}
	return nil
}

// one restores one backup document; an error stops the run (the cluster cannot be reached,
// the request is not authorized, the context is done).
func (r *runner) one(ctx context.Context, b *unstructured.Unstructured, dry bool) (Outcome, error) {
	gvk := b.GroupVersionKind()
	out := Outcome{APIVersion: b.GetAPIVersion(), Kind: gvk.Kind, Namespace: b.GetNamespace(), Name: b.GetName(),
		Restored: []string{}, Overwritten: []string{}, Conflicts: []string{}, NotHeld: []string{}}
	crd := r.crds[gvk.GroupKind()]
	if crd == nil {
		out.State, out.Reason = StateFailed, fmt.Sprintf("no CustomResourceDefinition of the cluster has kind %s in group %s", gvk.Kind, gvk.Group)
		return out, nil
	}
	out.CRD = crd.Name
	if !dry && !r.changed[crd.Name] {
		if done, err := r.writePlanned(ctx, crd, b.GetNamespace(), &out); done || err != nil {
			return out, err
		}
	}
	clean := cleaned(b)
	target, err := r.choose(ctx, crd, clean, gvk.Version)
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	if err != nil {
		out.State, out.Reason = StateFailed, err.Error()
		return out, nil
	}
	out.Version = target.version
	out.NotHeld, out.Defaults = splitDefaults(crd, gvk.Version, clean.Object, target.notHeld)
	target.notHeld = out.NotHeld
	if target.obj != nil {
		clean = target.obj
	}
	for attempt := 0; ; attempt++ {
		r.planned = nil
		err := r.write(ctx, crd, target, clean, &out, dry)
		if apierrors.IsConflict(err) && attempt < 4 {
			out.Restored, out.Overwritten, out.Conflicts, out.NotHeld = []string{}, []string{}, []string{}, target.notHeld
			out.LostManagers, out.ManagersReset = nil, false
			continue // the object changed between our read and write: compare again
		}
		if err != nil {
			if fatal(ctx, err) {
				return out, err
			}
			out.State, out.Reason = StateFailed, err.Error()
		}
		break
	}
	if out.State == StateUnchanged && len(out.NotHeld) > 0 {
		out.State = StateNotHeld
	}
	if len(out.NotHeld) > 0 && out.Reason == "" {
		out.Reason = fmt.Sprintf("no served version of %s holds %s", crd.Name, strings.Join(out.NotHeld, ", "))
	}
	return out, nil
}

// fatal errors stop the run: the context is done, the cluster cannot be reached or the
// credentials are refused. Others (rejected, admission) are the object's outcome.
func fatal(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true
	}
	return apierrors.IsUnauthorized(err) || apierrors.IsServiceUnavailable(err)
}

// target is the version a backup document is written at and what it holds there.
type target struct {
	version string
	// held is the object as that version holds it (server-like: pruned, defaulted); nil when
	// preview could not say (the server's dry run decides).
	held    map[string]any
	notHeld []string
	// obj is the backup converted to version by the CRD's webhook (nil: the backup as it is).
	obj *unstructured.Unstructured
}

// cleaned is the backup object without status and without server-set metadata: what a
// restore may write (apiVersion, kind, name, namespace, labels, annotations, the rest).
func cleaned(b *unstructured.Unstructured) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range b.Object {
		if k != "metadata" && k != "status" {
			u.Object[k] = v
		}
	}
	md := map[string]any{"name": b.GetName()}
	if ns := b.GetNamespace(); ns != "" {
		md["namespace"] = ns
	}
	if l := b.GetLabels(); len(l) > 0 {
		md["labels"] = toAny(l)
	}
	if a := b.GetAnnotations(); len(a) > 0 {
		md["annotations"] = toAny(a)
	}
	u.Object["metadata"] = md
	return u
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// choose picks the served version that keeps the most of the object.
func (r *runner) choose(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, clean *unstructured.Unstructured, from string) (*target, error) {
	served := crdinfo.ServedVersions(crd)
	if len(served) == 0 {
		return nil, fmt.Errorf("%s serves no version", crd.Name)
	}
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		// The API server converts through the webhook from the backup's own version; another
		// version's schema names fields differently, so relabelling would be wrong.
		if !slices.Contains(served, from) {
			// The API server no longer converts from the backup's version: ask the CRD's own
			// webhook, as the API server would, for the object at a served version (the
			// storage version first), and back, to say what the backup loses there.
			to := crdinfo.StorageVersion(crd)
			if !slices.Contains(served, to) {
				to = served[0]
			}
			conv, notHeld, err := r.viaWebhook(ctx, crd, clean, from, to)
			if err != nil {
				return nil, fmt.Errorf("%s converts through a webhook and no longer serves %s, the backup's version, and its webhook did not convert the backup to %s: %v", crd.Name, from, to, err)
			}
			return &target{version: to, notHeld: notHeld, obj: conv}, nil
		}
		return &target{version: from, notHeld: []string{}}, nil
	}
	prev, err := r.w.Previewer(crd)
	if err != nil {
		return nil, fmt.Errorf("reading the schemas of %s: %w", crd.Name, err)
	}
	storage := crdinfo.StorageVersion(crd)
	order := slices.Clone(served)
	if i := slices.Index(order, storage); i > 0 {
		order = append([]string{storage}, slices.Delete(order, i, i+1)...)
	}
	var best *target
	for _, v := range order {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		u := clean.DeepCopy()
		u.SetAPIVersion(schema.GroupVersion{Group: crd.Spec.Group, Version: v}.String())
		data, err := u.MarshalJSON()
		if err != nil {
			return nil, err
		}
		res, err := prev.Create(ctx, data, preview.PreviewOptions{FieldValidation: preview.FieldValidationIgnore, ReadVersion: v, Namespace: clean.GetNamespace()})
		if err != nil {
			return nil, fmt.Errorf("previewing at %s: %w", v, err)
		}
		if !res.Accepted() || res.Object == nil {
			continue
		}
		// What the version drops (convert's loss rule): the fields of the backup the create
		// at v does not give back at their value. A field the version's own defaulting added
		// (e.g. v1beta1's default spec.gitImplementation, pruned by the storage version v1) is
		// not the backup's; one the version reads back at the backup's value is held.
		var losses []string
		for _, d := range convert.Losses(u.Object, res.Object) {
			losses = append(losses, d.Path)
		}
		lost := lostLeaves(clean.Object, losses)
		t := &target{version: v, held: res.Object, notHeld: dataPaths(lost)}
		if best == nil || len(t.notHeld) < len(best.notHeld) {
			best = t
		}
	}
	if best == nil {
		// Every version rejects a create of it: an update (ratcheting) may still pass; write at
		// the storage version (or the first served) and let the server's dry run answer.
		return &target{version: order[0], notHeld: []string{}}, nil
	}
	return best, nil
}

// splitDefaults moves out of notHeld the fields whose backup value equals the default of the
// live CRD's schema for the backup's version (served or not) at that path: the API server's
// defaulting at that version produced them, so they say nothing the object's writer said.
// A version the live CRD no longer lists proves nothing: its fields stay not held.
func splitDefaults(crd *apiextensionsv1.CustomResourceDefinition, from string, backup map[string]any, notHeld []string) (held, defaults []string) {
	held = []string{}
	var props *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == from && v.Schema != nil {
			props = v.Schema.OpenAPIV3Schema
		}
	}
	for _, p := range notHeld {
		if d, ok := schemaDefault(props, p); ok && !strings.Contains(p, "[") {
			if bv, found, _ := lookup(backup, strings.Split(p, ".")); found && same(bv, d) {
				defaults = append(defaults, p)
				continue
			}
		}
		held = append(held, p)
	}
	return held, defaults
}

// schemaDefault is the default a structural schema gives the dotted path (through properties
// only).
func schemaDefault(s *apiextensionsv1.JSONSchemaProps, p string) (any, bool) {
	for _, k := range strings.Split(p, ".") {
		if s == nil {
			return nil, false
		}
		c, ok := s.Properties[k]
		if !ok {
			return nil, false
		}
		s = &c
	}
	if s == nil || s.Default == nil {
		return nil, false
	}
	var v any
	if err := json.Unmarshal(s.Default.Raw, &v); err != nil {
		return nil, false
	}
	return v, true
}

// WebhookTimeout bounds each ConversionReview a restore sends to a CRD's webhook.
const WebhookTimeout = 10 * time.Second

// viaWebhook converts the backup object from its version to the served version to through
// the CRD's conversion webhook, and back, with convert's client: the API server's checks of
// every answer (an answer it would refuse — another kind, uid, count, name — is an error, as
// convert reports it) and convert's loss rule for the round trip (a field of the backup the
// round trip loses is one version to cannot hold: reported, never claimed restored). A version
// the CRD no longer lists has no schema here: nothing is pruned or defaulted in it.
func (r *runner) viaWebhook(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, clean *unstructured.Unstructured, from, to string) (*unstructured.Unstructured, []string, error) {
	var client rest.Interface
	if r.c.Kube != nil {
		client = r.c.Kube.CoreV1().RESTClient()
	}
	tr, err := convert.DefaultTransport(crd, client, WebhookTimeout)
	if err != nil {
		return nil, nil, err
	}
	run := crd
	if _, err := crdinfo.Lookup(crd, from); err != nil {
		run = crd.DeepCopy()
		run.Spec.Versions = append(run.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: from})
	}
	var conv map[string]any
	rep, err := convert.Run(ctx, convert.Options{CRD: run, To: to, RoundTrip: true, Transport: tr, BisectRequests: -1,
		Converted: func(_ string, _, c map[string]any) { conv = c }}, []convert.Object{{Source: objectKey(clean), Object: clean.Object}})
	if err != nil {
		return nil, nil, err
	}
	if rep.Unreachable != "" {
		return nil, nil, fmt.Errorf("%s: %s", tr.Describe(), rep.Unreachable)
	}
	var losses, refused []string
	for _, f := range rep.Findings {
		switch {
		case f.Check == convert.CheckPruned:
			// Judged by the round trip, which starts back from the pruned object (as the
			// preflight judges a webhook).
		case f.Check == convert.CheckRoundTrip:
			losses = append(losses, f.Path)
		case f.Severity == convert.SeverityError:
			refused = append(refused, fmt.Sprintf("%s (%s): %s", f.Check, f.Direction, f.Detail))
		}
	}
	if len(refused) > 0 {
		return nil, nil, fmt.Errorf("%s answered what the API server refuses: %s", tr.Describe(), strings.Join(refused, "; "))
	}
	if conv == nil {
		return nil, nil, fmt.Errorf("%s did not convert it", tr.Describe())
	}
	return cleaned(&unstructured.Unstructured{Object: conv}), dataPaths(lostLeaves(clean.Object, losses)), nil
}

// objectKey is namespace/name, or the name of a cluster-scoped object.
func objectKey(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// lostLeaves are the restorable fields of obj (leaves) that the lost paths (convert's notation,
// convert.PathOf) take: each leaf at or under a lost path and, for a loss inside a leaf's list,
// the lost path itself, in the leaves' dotted notation.
func lostLeaves(obj map[string]any, lost []string) []string {
	var out []string
	for _, l := range leaves(obj) {
		lp := convert.PathOf(l.path...)
		for _, p := range lost {
			switch {
			case p == lp || strings.HasPrefix(lp, p+".") || strings.HasPrefix(lp, p+"["):
				out = append(out, l.String())
			case strings.HasPrefix(p, lp+"[") || strings.HasPrefix(p, lp+"."):
				out = append(out, l.String()+dotted(p[len(lp):]))
			}
		}
	}
	return out
}

// dotted writes a path of convert's notation with keys as plain dotted names
// ([0]["a.b"].c becomes [0].a.b.c).
func dotted(p string) string {
	var b strings.Builder
	for p != "" {
		if strings.HasPrefix(p, `["`) {
			if q, err := strconv.QuotedPrefix(p[1:]); err == nil {
				k, _ := strconv.Unquote(q)
				b.WriteString("." + k)
				p = p[1+len(q)+1:]
				continue
			}
		}
		b.WriteByte(p[0])
		p = p[1:]
	}
	return b.String()
}

// dataPaths are the paths outside metadata and status, sorted and unique.
func dataPaths(ps []string) []string {
	out := []string{}
	for _, p := range ps {
		if p == "metadata" || p == "status" || strings.HasPrefix(p, "metadata.") || strings.HasPrefix(p, "status.") || strings.HasPrefix(p, "status[") {
			continue
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// leaf is one restorable field of the backup: a path to a value that is not a non-empty map
// (lists are compared and restored whole).
type leaf struct {
	path []string
	val  any
}

func (l leaf) String() string { return strings.Join(l.path, ".") }

// leaves lists the restorable fields of a cleaned object: every top-level field but
// apiVersion, kind and metadata, descended through maps; each label and annotation.
func leaves(obj map[string]any) []leaf {
	var out []leaf
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				walk(append(slices.Clone(path), k), m[k])
			}
			return
		}
		if v == nil {
			return // a null cannot be restored by a merge patch, and holds nothing
		}
		out = append(out, leaf{path: path, val: v})
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		switch k {
		case "apiVersion", "kind", "status":
			continue
		case "metadata":
			md, _ := obj[k].(map[string]any)
			for _, mk := range []string{"labels", "annotations"} {
				m, _ := md[mk].(map[string]any)
				for _, key := range slices.Sorted(maps.Keys(m)) {
					out = append(out, leaf{path: []string{"metadata", mk, key}, val: m[key]})
				}
			}
			continue
		}
		walk([]string{k}, obj[k])
	}
	return out
}

// lookup returns the value at path; blocked is true when a value on the way is not a map.
func lookup(obj map[string]any, path []string) (v any, found, blocked bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, true
		}
		cur, ok = m[p]
		if !ok {
			return nil, false, false
		}
	}
	return cur, true, false
}

func set(obj map[string]any, path []string, v any) {
	m := obj
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// same compares two JSON values by their canonical encoding (int64 1 equals float64 1 once
// encoded; map keys sorted).
func same(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// heldValue is the value the target version holds at the leaf's path (preview's object), or
// the backup's value when preview could not say. ok is false when the version drops it.
func (t *target) heldValue(l leaf) (any, bool) {
	if t.held == nil {
		return l.val, true
	}
	v, found, _ := lookup(t.held, l.path)
	return v, found
}

func (r *runner) resource(crd *apiextensionsv1.CustomResourceDefinition, v, ns string) dynamic.ResourceInterface {
	ri := r.c.Dynamic.Resource(crdinfo.GVR(crd, v))
	if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
		return ri.Namespace(ns)
	}
	return ri
}

// write compares the backup with the live object at t.version and writes what is missing.
func (r *runner) write(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, t *target, clean *unstructured.Unstructured, out *Outcome, dry bool) error {
	ri := r.resource(crd, t.version, clean.GetNamespace())
	live, err := ri.Get(ctx, clean.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return r.recreate(ctx, ri, crd, t, clean, out, dry)
	}
	if err != nil {
		return err
	}
	patch := map[string]any{}
	var sets []leaf
	for _, l := range leaves(clean.Object) {
		hv, ok := t.heldValue(l)
		lv, found, blocked := lookup(live.Object, l.path)
		if !ok {
			if found && same(lv, l.val) {
				// The API server's answer at this version holds the backup's value (stored,
				// or defaulted on read): held, whatever preview said.
				out.NotHeld = without(out.NotHeld, []string{l.String()})
			}
			continue // in notHeld (preview's pruned paths)
		}
		var missing []string
		switch {
		case found && same(lv, hv):
		case !found && !blocked:
			set(patch, l.path, hv)
			sets = append(sets, leaf{path: l.path, val: hv})
			out.Restored = append(out.Restored, l.String())
		case found && prunedFrom(hv, lv, l.String(), &missing) && len(missing) > 0:
			// A list whose items lost fields (what a re-encoding does): the backup's list is
			// written whole, and the fields it puts back are reported.
			set(patch, l.path, hv)
			sets = append(sets, leaf{path: l.path, val: hv})
			out.Restored = append(out.Restored, missing...)
		default:
			out.Conflicts = append(out.Conflicts, l.String())
			if r.o.Force {
				set(patch, l.path, hv)
				sets = append(sets, leaf{path: l.path, val: hv})
				out.Overwritten = append(out.Overwritten, l.String())
			}
		}
	}
	if len(out.Conflicts) > 0 && !r.o.Force {
		out.State = StateConflict
		out.Reason = fmt.Sprintf("changed since the backup: %s (left as it is)", strings.Join(out.Conflicts, ", "))
		out.Restored = []string{}
		return nil
	}
	if len(sets) == 0 {
		out.State = StateUnchanged
		return nil
	}
	set(patch, []string{"metadata", "resourceVersion"}, live.GetResourceVersion())
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	po := metav1.PatchOptions{FieldManager: r.o.FieldManager, DryRun: []string{metav1.DryRunAll}}
	res, err := ri.Patch(ctx, clean.GetName(), types.MergePatchType, body, po)
	if err != nil {
		return err
	}
	// The server's answer must hold every restored field: what it drops (a webhook's
	// conversion, the storage version's schema) is reported, not claimed restored.
	if dropped := droppedBy(res.Object, sets); len(dropped) > 0 {
		out.NotHeld = mergeSorted(out.NotHeld, dropped)
		out.Restored = without(out.Restored, dropped)
		out.Overwritten = without(out.Overwritten, dropped)
		if len(out.Restored)+len(out.Overwritten) == 0 {
			out.State = StateNotHeld
			return nil
		}
	}
	out.State = StateRestored
	before := keptManagers(live, out.Overwritten)
	out.LostManagers, out.ManagersReset = preflight.LostManagers(before, res.GetManagedFields())
	if dry {
		if !r.o.DryRun {
			r.planned = &plannedWrite{Body: body, Before: before, Outcome: *out}
		}
		return nil
	}
	var consented []string
	if r.entry != nil {
		consented = r.entry.Managers
	}
	if extra := without(out.LostManagers, consented); len(extra) > 0 {
		out.State = StateFailed
		out.Reason = fmt.Sprintf("not written: its write would now drop field managers the dry run before did not list (%s); run the restore again to see and accept them", strings.Join(extra, ", "))
		out.Restored, out.Overwritten, out.LostManagers, out.ManagersReset = []string{}, []string{}, nil, false
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	po.DryRun = nil
	wctx, cancel := migrate.WriteContext(ctx)
	res, err = ri.Patch(wctx, clean.GetName(), types.MergePatchType, body, po)
	cancel()
	if err != nil {
		return err
	}
	// What the write itself dropped (the report says what happened, not what was expected).
	out.LostManagers, out.ManagersReset = preflight.LostManagers(before, res.GetManagedFields())
	return nil
}

// writePlanned sends, in the write pass, the write the dry-run pass checked for the document
// at hand, when there is one: done when the API server answered it (the outcome is the dry
// run's, with the managers the write itself dropped) or refused it for a reason of its own (a
// failed outcome; err when that stops the run). Not done when there is none, or when the object
// changed or went since the dry run (409, 404): it is then read and compared again.
func (r *runner) writePlanned(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, ns string, out *Outcome) (bool, error) {
	e := r.entry
	if e == nil || e.Plan == nil || len(without(e.Plan.Outcome.LostManagers, e.Managers)) > 0 {
		return false, nil
	}
	p := e.Plan
	ri := r.resource(crd, p.Outcome.Version, ns)
	if err := ctx.Err(); err != nil {
		return true, err
	}
	wctx, cancel := migrate.WriteContext(ctx)
	res, err := ri.Patch(wctx, out.Name, types.MergePatchType, p.Body, metav1.PatchOptions{FieldManager: r.o.FieldManager})
	cancel()
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		if fatal(ctx, err) {
			return true, err
		}
		out.Version, out.State, out.Reason = p.Outcome.Version, StateFailed, err.Error()
		return true, nil
	}
	*out = p.Outcome
	out.LostManagers, out.ManagersReset = preflight.LostManagers(p.Before, res.GetManagedFields())
	return true, nil
}

// keptManagers are the managedFields entries of live a write must keep (their fields emptied
// of FieldsV1, which preflight.LostManagers does not compare): all but an entry that owned only
// fields the write overwrites (Force: the restore takes them, with consent, and the API server
// drops the emptied entry).
func keptManagers(live *unstructured.Unstructured, overwritten []string) []metav1.ManagedFieldsEntry {
	var before []metav1.ManagedFieldsEntry
	for _, e := range live.GetManagedFields() {
		if !ownedOnly(e, overwritten) {
			e.FieldsV1 = nil
			before = append(before, e)
		}
	}
	return before
}

// ownedOnly reports whether entry e owns fields and each is one of paths (dotted, as
// Outcome.Overwritten names them) or under one.
func ownedOnly(e metav1.ManagedFieldsEntry, paths []string) bool {
	if len(paths) == 0 || e.FieldsV1 == nil {
		return false
	}
	s := &fieldpath.Set{}
	if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil || s.Empty() {
		return false
	}
	only := true
	s.Iterate(func(p fieldpath.Path) {
		ps := p.String()
		if !slices.ContainsFunc(paths, func(o string) bool {
			o = "." + o
			return ps == o || strings.HasPrefix(ps, o+".") || strings.HasPrefix(ps, o+"[")
		}) {
			only = false
		}
	})
	return only
}

// prunedFrom reports whether live is backup with fields removed and nothing else changed
// (maps: no key live has that backup lacks; lists: the same length, item by item; other
// values: equal), and appends the removed fields' paths to missing.
func prunedFrom(backup, live any, path string, missing *[]string) bool {
	switch b := backup.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k := range l {
			if _, ok := b[k]; !ok {
				return false
			}
		}
		for _, k := range slices.Sorted(maps.Keys(b)) {
			lv, ok := l[k]
			if !ok {
				if b[k] != nil {
					*missing = append(*missing, path+"."+k)
				}
				continue
			}
			if !prunedFrom(b[k], lv, path+"."+k, missing) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(b) {
			return false
		}
		for i := range b {
			if !prunedFrom(b[i], l[i], fmt.Sprintf("%s[%d]", path, i), missing) {
				return false
			}
		}
		return true
	}
	return same(backup, live)
}

func droppedBy(obj map[string]any, sets []leaf) []string {
	var out []string
	for _, l := range sets {
		v, found, _ := lookup(obj, l.path)
		if !found || !same(v, l.val) {
			out = append(out, l.String())
		}
	}
	return out
}

func without(s, drop []string) []string {
	out := []string{}
	for _, x := range s {
		if !slices.Contains(drop, x) {
			out = append(out, x)
		}
	}
	return out
}

func mergeSorted(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

// recreate creates an object deleted since the backup (only when asked): name, namespace,
// labels, annotations and the fields the target version holds; not status, ownerReferences or
// finalizers (their owners and controllers may be gone).
func (r *runner) recreate(ctx context.Context, ri dynamic.ResourceInterface, crd *apiextensionsv1.CustomResourceDefinition, t *target, clean *unstructured.Unstructured, out *Outcome, dry bool) error {
	if !r.o.Recreate {
		out.State, out.Reason = StateMissing, "deleted since the backup: not re-created"
		return nil
	}
	obj := map[string]any{"apiVersion": schema.GroupVersion{Group: crd.Spec.Group, Version: t.version}.String(), "kind": crd.Spec.Names.Kind}
	md := map[string]any{"name": clean.GetName()}
	if ns := clean.GetNamespace(); ns != "" && crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
		md["namespace"] = ns
	}
	obj["metadata"] = md
	var sets []leaf
	for _, l := range leaves(clean.Object) {
		hv, ok := t.heldValue(l)
		if !ok {
			continue
		}
		set(obj, l.path, hv)
		sets = append(sets, leaf{path: l.path, val: hv})
		out.Restored = append(out.Restored, l.String())
	}
	u := &unstructured.Unstructured{Object: obj}
	co := metav1.CreateOptions{FieldManager: r.o.FieldManager, DryRun: []string{metav1.DryRunAll}}
	res, err := ri.Create(ctx, u, co)
	if err != nil {
		return err
	}
	if dropped := droppedBy(res.Object, sets); len(dropped) > 0 {
		out.NotHeld = mergeSorted(out.NotHeld, dropped)
		out.Restored = without(out.Restored, dropped)
	}
	out.State = StateRecreated
	if dry {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	co.DryRun = nil
	wctx, cancel := migrate.WriteContext(ctx)
	defer cancel()
	_, err = ri.Create(wctx, u, co)
	return err
}
