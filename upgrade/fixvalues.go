package upgrade

// fixvalues.go: the values of a type change converted by the run (--fix-values), after the
// backup, keeping every field manager.
//
// A release whose new storage version types a field differently (the OpenTelemetry operator's
// spec.config: YAML text in v1alpha1, an object in v1beta1) leaves the stored objects holding
// the old type: the API server accepts their writes (the unchanged value ratchets) but cannot
// type them, so server-side apply fails on them and a rewrite cannot record their field
// ownership (servers before 1.37 drop every managedFields entry of the object; 1.37 keeps the
// old ones). Converting the value is a write the API server cannot type either: the live object
// it compares with is the old one. Measured on kube-apiserver 1.34 and 1.37 (e2e
// TestOpenTelemetryFixValues): an update at the new version with the converted value is
// accepted, and leaves no managedFields (1.34) or the old entries unchanged (1.37); a second
// update that sends the entries moved to the new version and to the converted value's paths
// (ownership.ToVersion, ownership.MoveToValues) is typed and kept as sent, and so is every
// later write: server-side apply then works for every manager.
//
// So each object is written twice, and what the second write sets is recorded first in a
// journal beside the rewrite's checkpoint: a run stopped between the two writes (Ctrl-C,
// SIGKILL, a lost connection) sets the entries when run again, from the journal, before
// anything else (ownership.Restore keeps what was written since).
//
// The writes are at the storage version, which must be the version the values are converted
// for: a write encoded at another version would be pruned by that version's schema (a map
// where it has a string loses every key). What such a write drops of the object is what the
// rewrite that follows drops (the fields the storage version lacks): the caller has taken the
// backup and the consent for that first (upgrade's preflight, migrate's).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/ownership"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/preflight"
)

// FixValuesOptions say which values FixValues converts.
type FixValuesOptions struct {
	// CRD is the CRD's name; Version the version whose typed schema the values must fit: the
	// CRD's storage version, served.
	CRD, Version string
	// Journal records each object's managedFields before its values are converted
	// (FixValuesJournal of the rewrite's checkpoint).
	Journal string
	// ChunkSize of the list pages (0: 500).
	ChunkSize int64
	// FieldManager of the writes ("" is kubectl-crdver). It owns nothing afterwards: the
	// converted values stay their managers'.
	FieldManager string
	// Notify receives a line per object converted.
	Notify func(string)
	// DryRun lists what would be converted (Fixed, without managers) and left, writing
	// nothing (not even the journal); Version need only be served (a storage switch may come
	// before the conversion).
	DryRun bool
}

// FixValuesReport is what FixValues did.
type FixValuesReport struct {
	CRD     string `json:"crd"`
	Version string `json:"version"`
	DryRun  bool   `json:"dryRun,omitempty"`
	// Fixed are the objects whose values were converted.
	Fixed []FixedObject `json:"fixed"`
	// Restored are the objects (namespace/name) whose managedFields entries were set from the
	// journal: an earlier run stopped between converting their values and moving their
	// entries.
	Restored []string `json:"restored,omitempty"`
	// Left are the objects holding values FixValues does not convert, with why (Errors): no
	// lossless conversion, or the API server rejects the object with the converted values.
	Left []ObjectFinding `json:"left"`
}

// FixedObject is one object whose values were converted.
type FixedObject struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Values are the converted values, as "PATH: TYPE → EXPECTED".
	Values []string `json:"values"`
	// Managers are the object's field managers after the conversion, as
	// "manager (Operation at apiVersion)"; LostManagers those it had before and has no longer
	// (empty unless the API server dropped an entry the move set).
	Managers     []string `json:"managers"`
	LostManagers []string `json:"lostManagers,omitempty"`
}

// Err is what keeps the rewrite that follows from running: objects left with values of
// another type (ErrValuesForPerson: the rewrite cannot keep their field managers on servers
// before 1.37, nor make server-side apply work on them), or field managers the conversion did
// not keep. nil when there is neither.
func (r *FixValuesReport) Err() error {
	var left, lost []string
	for _, l := range r.Left {
		left = append(left, objectKey(l.Namespace, l.Name)+": "+strings.Join(l.Errors, "; "))
	}
	for _, f := range r.Fixed {
		if len(f.LostManagers) > 0 {
			lost = append(lost, objectKey(f.Namespace, f.Name)+": "+strings.Join(f.LostManagers, ", "))
		}
	}
	switch {
	case len(left) > 0:
		// For a person to change: the user must act (exit 1), whichever command ran it.
		return outcome.Wrap(outcome.Findings, fmt.Errorf("%w: %s: values of another type not converted (%s); the rewrite did not run: change them so that they convert, then run the same command again", ErrValuesForPerson, r.CRD, strings.Join(left, "; ")))
	case len(lost) > 0:
		return fmt.Errorf("%s: the conversion of values did not keep every field manager (%s): the rewrite did not run", r.CRD, strings.Join(lost, "; "))
	}
	return nil
}

// stopAfterFirstWrite, set by tests, stops FixValues (with its error) right after an object's
// first write, as a kill there does: the journal written, the second write not sent.
var stopAfterFirstWrite func(written *unstructured.Unstructured) error

// FixValuesJournal is the journal of FixValues beside a rewrite's checkpoint file.
func FixValuesJournal(checkpoint string) string { return checkpoint + ".fix-values" }

// fixJournal is what FixValues records before converting the values of a page of objects.
type fixJournal struct {
	// CRD is the UID of the CRD the records are for: another CRD of the same name starts afresh.
	CRD     string                `json:"crd"`
	Version string                `json:"version"`
	Objects map[string]*fixRecord `json:"objects"`
}

// fixRecord is one object's managedFields before its values were converted (Original) and
// after the move (Moved): what its second write sets.
type fixRecord struct {
	Namespace string                      `json:"namespace,omitempty"`
	Name      string                      `json:"name"`
	Original  []metav1.ManagedFieldsEntry `json:"original"`
	Moved     []metav1.ManagedFieldsEntry `json:"moved"`
}

// FixValues converts, in every object of the CRD read at o.Version, each value that does not
// fit o.Version's typed schema and has a lossless conversion (preflight.TypeChecker.Convert),
// and moves its field managers' entries to o.Version and to the converted values' paths; the
// objects it cannot convert are left (Report.Left). It first finishes what a stopped run
// recorded in the journal. o.Version must be the CRD's storage version.
func FixValues(ctx context.Context, c *migrate.Clients, o FixValuesOptions) (*FixValuesReport, error) {
	if o.FieldManager == "" {
		o.FieldManager = "kubectl-crdver"
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = 500
	}
	rep := &FixValuesReport{CRD: o.CRD, Version: o.Version, DryRun: o.DryRun, Fixed: []FixedObject{}, Left: []ObjectFinding{}}
	crd, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, o.CRD, metav1.GetOptions{})
	if err != nil {
		return rep, fmt.Errorf("getting %s: %w", o.CRD, err)
	}
	if !crdinfo.IsServed(crd, o.Version) {
		return rep, fmt.Errorf("%s: %s is not served: the values cannot be read or converted at it", o.CRD, o.Version)
	}
	if s := crdinfo.StorageVersion(crd); s != o.Version && !o.DryRun {
		return rep, fmt.Errorf("%s: the values can be converted for %s only while it is the storage version, served (the storage version is %s): written at %s, the converted values would be stored under %s's schema, which prunes them", o.CRD, o.Version, s, o.Version, s)
	}
	tc, err := preflight.NewTypeChecker(crd)
	if err != nil {
		return rep, err
	}
	f := &fixer{c: c, o: o, crd: crd, tc: tc, rep: rep, j: fixJournal{Objects: map[string]*fixRecord{}}}
	if !o.DryRun {
		if err := f.loadJournal(); err != nil {
			return rep, err
		}
		if err := f.finishJournal(ctx); err != nil {
			return rep, err
		}
	}
	src := plan.NewClusterSource(c.Dynamic, crdinfo.GVR(crd, o.Version), o.ChunkSize)
	for {
		page, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return rep, fmt.Errorf("listing %s at %s: %w", o.CRD, o.Version, err)
		}
		if err := f.page(ctx, page); err != nil {
			return rep, err
		}
	}
	if len(f.j.Objects) == 0 && !o.DryRun {
		if err := os.Remove(o.Journal); err != nil && !errors.Is(err, os.ErrNotExist) {
			return rep, fmt.Errorf("removing the journal %s: %w", o.Journal, err)
		}
	}
	return rep, nil
}

type fixer struct {
	c   *migrate.Clients
	o   FixValuesOptions
	crd *apiextensionsv1.CustomResourceDefinition
	tc  *preflight.TypeChecker
	rep *FixValuesReport
	j   fixJournal
}

func (f *fixer) notify(format string, args ...any) {
	if f.o.Notify != nil {
		f.o.Notify(fmt.Sprintf(format, args...))
	}
}

func (f *fixer) res(ns string) dynamic.ResourceInterface {
	r := f.c.Dynamic.Resource(crdinfo.GVR(f.crd, f.o.Version))
	if ns == "" {
		return r
	}
	return r.Namespace(ns)
}

func (f *fixer) loadJournal() error {
	f.j = fixJournal{CRD: string(f.crd.UID), Version: f.o.Version, Objects: map[string]*fixRecord{}}
	b, err := os.ReadFile(f.o.Journal)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var j fixJournal
	if err == nil {
		err = json.Unmarshal(b, &j)
	}
	if err != nil {
		return fmt.Errorf("reading the journal %s: %w (it records the field managers of objects whose values are being converted: remove it only after checking theirs)", f.o.Journal, err)
	}
	if j.CRD == string(f.crd.UID) && j.Version == f.o.Version && j.Objects != nil {
		f.j.Objects = j.Objects
	}
	return nil
}

func (f *fixer) saveJournal() error {
	if err := migrate.WriteJSONAtomic(f.o.Journal, f.j); err != nil {
		return fmt.Errorf("writing the journal %s: %w", f.o.Journal, err)
	}
	return nil
}

// finishJournal sets the moved entries of every object the journal names whose values were
// converted (it fits the typed schema now) and whose entries were not set yet: a run stopped
// between its two writes. An object that still does not fit is converted again by the pass
// that follows; one that is gone, or is another object of the same name, is dropped.
func (f *fixer) finishJournal(ctx context.Context) error {
	if len(f.j.Objects) == 0 {
		return nil
	}
	for uid, rec := range f.j.Objects {
		u, err := f.res(rec.Namespace).Get(ctx, rec.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			delete(f.j.Objects, uid)
			continue
		case err != nil:
			return fmt.Errorf("reading %s: %w", objectKey(rec.Namespace, rec.Name), err)
		case string(u.GetUID()) != uid:
			delete(f.j.Objects, uid)
			continue
		case f.tc.Check(u.Object, f.o.Version) != nil:
			continue
		}
		_, wrote, err := f.setEntries(ctx, u, rec)
		if err != nil {
			return err
		}
		if wrote {
			f.rep.Restored = append(f.rep.Restored, objectKey(rec.Namespace, rec.Name))
			f.notify("%s %s: field managers set from the journal (a run stopped between converting its values and moving them)", f.o.CRD, objectKey(rec.Namespace, rec.Name))
		}
		delete(f.j.Objects, uid)
	}
	return f.saveJournal()
}

// fixCandidate is one object of a page to convert.
type fixCandidate struct {
	u         *unstructured.Unstructured
	converted map[string]any
	values    []string
	rec       *fixRecord
}

// page converts the values of a page's objects: every candidate recorded in the journal
// first (one write of the journal), then each object written twice.
func (f *fixer) page(ctx context.Context, items []unstructured.Unstructured) error {
	var cands []*fixCandidate
	for i := range items {
		cand, err := f.prepare(ctx, &items[i])
		if err != nil {
			return err
		}
		if cand != nil {
			cands = append(cands, cand)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	if f.o.DryRun {
		for _, cand := range cands {
			f.rep.Fixed = append(f.rep.Fixed, FixedObject{Namespace: cand.u.GetNamespace(), Name: cand.u.GetName(), Values: cand.values, Managers: []string{}})
		}
		return nil
	}
	for _, cand := range cands {
		f.j.Objects[string(cand.u.GetUID())] = cand.rec
	}
	if err := f.saveJournal(); err != nil {
		return err
	}
	for _, cand := range cands {
		if err := ctx.Err(); err != nil {
			// Stopped between objects: those not converted yet still hold the old values; the
			// next run prepares them afresh (their records are replaced).
			return errors.Join(err, f.saveJournal())
		}
		if err := f.fix(ctx, cand); err != nil {
			return err
		}
		delete(f.j.Objects, string(cand.u.GetUID()))
	}
	return f.saveJournal()
}

// prepare decides what to do with one object: nil when it fits (or is left, recorded in the
// report), else the converted object and its moved entries.
func (f *fixer) prepare(ctx context.Context, u *unstructured.Unstructured) (*fixCandidate, error) {
	converted, tm := f.tc.Convert(u.Object, f.o.Version)
	if len(tm) == 0 {
		return nil, nil
	}
	var values, why []string
	for _, m := range tm {
		values = append(values, m.Describe(f.o.Version))
		if m.Converted == "" {
			why = append(why, m.Describe(f.o.Version)+": no lossless conversion")
		}
	}
	if converted == nil {
		if len(why) == 0 {
			why = append(why, "a value sits where no conversion can be written (a list item by key)")
		}
		f.left(u, why)
		return nil, nil
	}
	if still := f.tc.Check(converted, f.o.Version); len(still) > 0 {
		for _, m := range still {
			why = append(why, "converted, "+m.Error)
		}
		f.left(u, why)
		return nil, nil
	}
	moved, err := f.move(ctx, u, converted)
	if err != nil {
		return nil, err
	}
	return &fixCandidate{u: u, converted: converted, values: values,
		rec: &fixRecord{Namespace: u.GetNamespace(), Name: u.GetName(), Original: u.GetManagedFields(), Moved: moved}}, nil
}

// move is u's managedFields entries as they are to be once its values are converted: moved
// to the version written at (as the rewrite moves them), then to the converted values' paths.
func (f *fixer) move(ctx context.Context, u *unstructured.Unstructured, converted map[string]any) ([]metav1.ManagedFieldsEntry, error) {
	at, _ := migrate.MoveEntries(ctx, f.c.Dynamic, f.crd, f.o.Version, u)
	entries := at.GetManagedFields()
	fields, err := f.tc.FieldSet(converted, f.o.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: the field set of the converted object: %w", f.o.CRD, objectKey(u.GetNamespace(), u.GetName()), err)
	}
	moved, _, err := ownership.MoveToValues(entries, u.Object, converted, fields)
	if err != nil {
		return nil, fmt.Errorf("%s %s: moving its managedFields entries: %w", f.o.CRD, objectKey(u.GetNamespace(), u.GetName()), err)
	}
	return moved, nil
}

// left records an object whose values are not converted; a record of it in the journal (a
// stopped run that had not written it yet) is dropped.
func (f *fixer) left(u *unstructured.Unstructured, why []string) {
	f.rep.Left = append(f.rep.Left, ObjectFinding{CRD: f.o.CRD, Namespace: u.GetNamespace(), Name: u.GetName(), Errors: why})
	delete(f.j.Objects, string(u.GetUID()))
}

// fix writes the converted values (the first write), then the moved entries (the second). An
// object changed since it was listed is read again and prepared again; one the API server
// rejects with the converted values is left.
func (f *fixer) fix(ctx context.Context, cand *fixCandidate) error {
	key := objectKey(cand.u.GetNamespace(), cand.u.GetName())
	for attempt := 1; ; attempt++ {
		body := cand.u.DeepCopy()
		body.Object = cand.converted
		written, err := f.res(body.GetNamespace()).Update(ctx, body, metav1.UpdateOptions{FieldManager: f.o.FieldManager})
		switch {
		case err == nil:
			if stopAfterFirstWrite != nil {
				if err := stopAfterFirstWrite(written); err != nil {
					return err
				}
			}
			// The entries are set whatever happens to ctx now (Ctrl-C leaves no object without
			// its managers; a kill does, until the journal is read again).
			sctx, cancel := migrate.WriteContext(ctx)
			after, _, err := f.setEntries(sctx, written, cand.rec)
			cancel()
			if err != nil {
				return err
			}
			f.fixed(cand, after)
			return nil
		case apierrors.IsConflict(err) && attempt < 5:
			fresh, gerr := f.res(cand.u.GetNamespace()).Get(ctx, cand.u.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) {
				return nil
			}
			if gerr != nil {
				return fmt.Errorf("reading %s %s: %w", f.o.CRD, key, gerr)
			}
			next, perr := f.prepare(ctx, fresh)
			if perr != nil {
				return perr
			}
			if next == nil {
				return nil // fits now, or left
			}
			// Recorded again before the write: the entries it has now are those the second
			// write replaces.
			*cand.rec = *next.rec
			cand.u, cand.converted, cand.values = next.u, next.converted, next.values
			if err := f.saveJournal(); err != nil {
				return err
			}
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
			// Rejected with the converted values (validation, an admission webhook): left.
			f.left(cand.u, []string{"the API server rejects it with the converted values: " + migrate.Reason(err)})
			return nil
		default:
			return fmt.Errorf("writing the converted values of %s %s: %w", f.o.CRD, key, err)
		}
	}
}

// setEntries is the second write: u's managedFields set to rec's moved entries where u still
// has the original ones or lost them (ownership.Restore), retried on conflict with the object
// read again. It returns the object as written (u when nothing needed writing).
func (f *fixer) setEntries(ctx context.Context, u *unstructured.Unstructured, rec *fixRecord) (*unstructured.Unstructured, bool, error) {
	key := objectKey(u.GetNamespace(), u.GetName())
	for attempt := 1; ; attempt++ {
		entries, changed, err := ownership.Restore(u.GetManagedFields(), rec.Original, rec.Moved)
		if err != nil {
			return nil, false, fmt.Errorf("%s %s: %w", f.o.CRD, key, err)
		}
		if !changed {
			return u, attempt > 1, nil
		}
		body := u.DeepCopy()
		body.SetManagedFields(entries)
		written, err := f.res(u.GetNamespace()).Update(ctx, body, metav1.UpdateOptions{FieldManager: f.o.FieldManager})
		if err == nil {
			return written, true, nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return nil, false, fmt.Errorf("setting the field managers of %s %s after converting its values: %w (running the same command again sets them from the journal %s)", f.o.CRD, key, err, f.o.Journal)
		}
		if u, err = f.res(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{}); err != nil {
			return nil, false, fmt.Errorf("reading %s %s: %w", f.o.CRD, key, err)
		}
	}
}

// fixed records a converted object with its managers before and after.
func (f *fixer) fixed(cand *fixCandidate, after *unstructured.Unstructured) {
	fo := FixedObject{Namespace: cand.u.GetNamespace(), Name: cand.u.GetName(), Values: cand.values, Managers: []string{}}
	all, _ := preflight.LostManagers(after.GetManagedFields(), nil)
	fo.Managers = append(fo.Managers, all...)
	var before []metav1.ManagedFieldsEntry
	for _, e := range cand.rec.Original {
		if !ownership.Vanished(e, after.Object) {
			before = append(before, e)
		}
	}
	if lost, _ := preflight.LostManagers(before, after.GetManagedFields()); len(lost) > 0 {
		fo.LostManagers = lost
	}
	f.rep.Fixed = append(f.rep.Fixed, fo)
	if len(fo.LostManagers) > 0 {
		f.notify("%s %s: converted %s; field managers LOST: %s", f.o.CRD, objectKey(fo.Namespace, fo.Name), strings.Join(cand.values, ", "), strings.Join(fo.LostManagers, ", "))
		return
	}
	f.notify("%s %s: converted %s; field managers kept: %s", f.o.CRD, objectKey(fo.Namespace, fo.Name), strings.Join(cand.values, ", "), strings.Join(slices.Sorted(slices.Values(fo.Managers)), ", "))
}

func objectKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// ObjectRef names an object as namespace/name (name alone when cluster-scoped).
func ObjectRef(ns, name string) string { return objectKey(ns, name) }

// mistyped is the plan's finding of the object m names when it holds values of another type
// (nil otherwise).
func (r *runner) mistyped(m ObjectFinding) *plan.Finding {
	it := r.item(m.CRD)
	if it == nil {
		return nil
	}
	for i := range it.Objects.Findings {
		f := &it.Objects.Findings[i]
		if f.Namespace == m.Namespace && f.Name == m.Name && len(f.TypeMismatches) > 0 {
			return f
		}
	}
	return nil
}

// fixesValuesOf: with --fix-values, the object's values of another type are converted (by the
// run, or once a person has changed their text) before its rewrite, which then types it: the
// field managers the preflight's dry run of that rewrite drops are not lost.
func (r *runner) fixesValuesOf(m ObjectFinding) bool {
	f := r.mistyped(m)
	return r.o.FixValues && f != nil && f.ValuesSpelledAsText()
}

// unfixableValues is why a run with --fix-values is refused for values no conversion and no
// change of their text fixes ("" when none): only a write at the new storage version can
// change them, which drops the object's field managers on servers before 1.37.
func (r *runner) unfixableValues() string {
	if !r.o.FixValues {
		return ""
	}
	var names []string
	for i := range r.items {
		for _, f := range r.items[i].Objects.Findings {
			if len(f.TypeMismatches) > 0 && !f.ValuesSpelledAsText() {
				names = append(names, r.items[i].CRD+" "+objectKey(f.Namespace, f.Name))
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("%s hold values of another type that no lossless conversion fixes and that are not text a person can change into a value that converts (%s; the plan lists each): only a write at the new storage version, once it is one, can change them, which drops their field managers on servers before 1.37",
		countObjects(len(names)), strings.Join(names, ", "))
}

// valuesForPerson is the runbook's fix-values step (for a person, after the backup): the run
// stops there with what to do, and a run of the same command once it is done goes on (its
// plan then finds the values converting: the step is gone).
func valuesForPerson(s *StepResult) error {
	s.State = StateManual
	at := s.Version
	edit := ""
	for _, c := range s.Commands {
		if strings.HasPrefix(c, "kubectl edit ") {
			edit = c
			break
		}
	}
	s.Detail = fmt.Sprintf("for you to do: change the values listed at %s (e.g. %s), then run the same command again", at, edit)
	return fmt.Errorf("%w: objects of %s hold values of another type that do not convert without loss (%s): change each at %s so that it converts (e.g. %s; the plan's fix-values step says what %s lacks), then run the same command again: it goes on from here, with the backup it took",
		ErrValuesForPerson, strings.Join(s.CRDs, ", "), strings.Join(s.Objects, "; "), at, edit, s.Target)
}

// valuesForPersonStep says what the runbook's fix-values step leaves to a person ("" when the
// runbook has none): a dry run ends on it as the run would stop there.
func valuesForPersonStep(rep *Report) string {
	if rep.Plan == nil {
		return ""
	}
	for _, s := range rep.Plan.Runbook {
		if s.Action == plan.ActionFixValues {
			return fmt.Sprintf("objects of %s hold values of another type that do not convert without loss: change each at %s so that it converts (the runbook's fix-values step lists them)", strings.Join(s.CRDs, ", "), s.Version)
		}
	}
	return ""
}

// fixValues converts the values of the CRD of a storage step that says so (RunbookStep.FixValues),
// once its storage version is the step's target; what it did is in the report.
func (r *runner) fixValues(ctx context.Context, s *StepResult, journal string) error {
	name := s.CRDs[0]
	fx, err := FixValues(ctx, r.c, FixValuesOptions{CRD: name, Version: s.Target, Journal: FixValuesJournal(journal), ChunkSize: r.o.ChunkSize,
		Notify: func(l string) { r.notify("%s", l) }})
	if fx != nil && (len(fx.Fixed) > 0 || len(fx.Restored) > 0 || len(fx.Left) > 0) {
		r.rep.FixedValues = append(r.rep.FixedValues, fx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrInterrupted, err)
		}
		return err
	}
	if err := fx.Err(); err != nil {
		return err
	}
	if len(fx.Fixed) > 0 {
		s.Detail = fmt.Sprintf("values of %s converted (field managers kept); ", countObjects(len(fx.Fixed)))
	}
	return nil
}
