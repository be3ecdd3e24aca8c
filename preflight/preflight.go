// Package preflight finds, before any write that re-encodes the objects of a CRD (a storage
// switch and rewrite: migrate, migrate --all, retire, upgrade), what that write would lose or
// be refused: every object is evaluated at the target version under the live CRD, with the
// API server's own code (the preview engine) and, for a conversion webhook, a round trip
// through the webhook (the convert package).
//
//   - Fields the rewrite would drop. The data of an object may be held at any version in
//     status.storedVersions (and the storage version). For each such version H other than the
//     target T, every object is read at H (a paged LIST through the API server) and at T:
//     with conversion strategy None, the API server's read path in T (preview.Read: decode at
//     H, convert by apiVersion, prune in T's schema); with a webhook, H → T → H through the
//     webhook (convert.RunSource, its pruned-fields and round-trip checks). Fields present at H
//     and gone at T are lost by a rewrite at T.
//   - Writes that would be rejected. Every object is read at T (a paged LIST) and the rewrite's
//     write of it at T is sent as a server-side dry run (nothing is written): the API server's
//     own decoding, defaulting, validation with ratcheting and admission say whether the
//     rewrite would fail on it, after the storage switch.
//
// It has no command-line code: it returns a Report, and Advice/BackupCommands say how to keep
// the data in words a caller prints.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/apistatus"
	"github.com/crdver/kubectl-crdver/internal/pager"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/preview"
)

// Options of a check.
type Options struct {
	// Target is the version the objects would be rewritten at ("" is the storage version).
	Target string
	// ChunkSize is the page size of the lists (0: 500). Memory is bounded by a page.
	ChunkSize int64
	// Progress, when set, is called after each page with the objects evaluated so far and
	// the number to evaluate (-1 while unknown). It is called from one goroutine.
	Progress func(done, total int64)
	// Transport reaches the CRD's conversion webhook (unused for strategy None). Without it,
	// what a webhook conversion loses is reported as unknown.
	Transport convert.Transport
	// MaxListed bounds the objects listed by name per kind of finding (0: 100); the counts
	// are complete.
	MaxListed int
	// SkipRejections leaves out the rejection pass (its dry-run writes need update rights):
	// only what the rewrite would lose is evaluated.
	SkipRejections bool
	// Concurrency fixes the number of dry-run writes in flight; 0 adapts it to the rate the
	// API server completes them and to its 429s, as the rewrite does (migrate.Gate).
	Concurrency int
	// QPS limits the check's requests per second; 0 means no client-side limit (the API
	// server's priority and fairness still applies, and 429s cut the writes in flight). dyn
	// should have no rate limiter of its own (migrate.NewClients builds such clients).
	QPS float64
	// After skips the objects listed up to this key (namespace/name, migrate.ObjectKey) in
	// both passes: a resumed rewrite writes only the objects after it (migrate.Checkpoint's
	// Through), so nothing is to be checked before it.
	After string
	// Evidence is a file (next to the rewrite's checkpoint) where the objects whose dry run was
	// accepted are recorded with their resourceVersion; a later check reads it and does not
	// send the dry run of an object unchanged since under the same CRD spec and admission
	// configuration (evidence.go). "" keeps no evidence.
	Evidence string
	// Throttled, when set, counts the API server's 429 answers on dyn's transport
	// (migrate.Clients.Throttled), including those client-go retried by itself.
	Throttled func() int64
}

// Loss is an object whose fields a rewrite at the target would drop.
type Loss struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// HeldAt is the version the fields are readable at (the data is there).
	HeldAt string `json:"heldAt"`
	// Fields are the JSON paths that would be gone (.spec.acls[0].operation).
	Fields []string `json:"fields"`
}

// Addition is an object whose conversion to the target adds fields or normalises values,
// which loses nothing (convert's loss rule: convert.Difference.Loss): reported, never a loss.
type Addition struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	HeldAt    string `json:"heldAt"`
	// Added are the JSON paths absent at HeldAt and present after the conversion (and back,
	// for a webhook); Normalised the strings that came back as another spelling of the same
	// duration or quantity ("5m" as "5m0s").
	Added      []string `json:"added,omitempty"`
	Normalised []string `json:"normalised,omitempty"`
}

// Rejection is an object whose no-op update at the target the API server would refuse.
type Rejection struct {
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name"`
	Errors    []string `json:"errors"`
}

// OwnershipLoss is an object whose rewrite, as the API server's dry run of it shows, would
// drop field managers: managedFields entries the object has and the written object has not.
type OwnershipLoss struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Lost are the entries gone: "manager (Operation at apiVersion)", with the subresource
	// when there is one.
	Lost []string `json:"lost"`
	// Reset: the written object has no managedFields at all.
	Reset bool `json:"reset,omitempty"`
}

// Report is what a check found. Its JSON form is the "preflight" section of migrate's and
// retire's -o json output: fields may be added, never renamed or removed.
type Report struct {
	CRD      string `json:"crd"`
	Group    string `json:"group"`
	Resource string `json:"resource"`
	Target   string `json:"target"`
	Strategy string `json:"strategy"`
	// Objects is the number of objects evaluated (read at the target; 0 when the rejection
	// pass was skipped).
	Objects int64 `json:"objects"`
	// HoldingVersions are the versions objects' data may be held at (status.storedVersions
	// and the storage version, served ones): a backup reads every one of them.
	HoldingVersions []string `json:"holdingVersions"`
	// Compared are the holding versions other than the target whose objects were compared
	// with the target.
	Compared []string `json:"compared"`
	// LossCount is the number of objects (per holding version) that would lose fields;
	// Losses lists them (at most Options.MaxListed).
	LossCount int64  `json:"lossCount"`
	Losses    []Loss `json:"losses"`
	// AddedCount is the number of objects (per holding version) whose conversion adds or
	// normalises fields and loses nothing there: not a loss, no consent needed; Added lists
	// them (at most Options.MaxListed).
	AddedCount int64      `json:"addedCount,omitempty"`
	Added      []Addition `json:"added,omitempty"`
	// RejectedCount is the number of objects whose write would be rejected; Rejected lists
	// them (at most Options.MaxListed).
	RejectedCount int64       `json:"rejectedCount"`
	Rejected      []Rejection `json:"rejected"`
	// OwnershipLossCount is the number of objects whose rewrite would drop field managers
	// (the dry run's managedFields compared with the object's); OwnershipLosses lists them (at
	// most Options.MaxListed). --allow-data-loss is no consent to it.
	OwnershipLossCount int64           `json:"ownershipLossCount"`
	OwnershipLosses    []OwnershipLoss `json:"ownershipLosses"`
	// NotNeeded says which passes were not run and what proves that they cannot find anything.
	NotNeeded []string `json:"notNeeded,omitempty"`
	// DryRuns is the number of objects whose write was sent as a dry run (the others were
	// proven accepted: see NotNeeded).
	DryRuns int64 `json:"dryRuns"`
	// DryRunInFlight says how many dry-run writes were in flight (nil when none was sent).
	DryRunInFlight *migrate.InFlight `json:"dryRunInFlight,omitempty"`
	// Unknown says what could not be evaluated: the answer there is not known.
	Unknown []string `json:"unknown"`
	// Backup are the commands that save every object at each version that holds data.
	Backup []string `json:"backup"`
	// NotServed are the stored versions not served (unknown above), and how to serve them.
	NotServed []NotServed `json:"notServed,omitempty"`
}

// Safe reports whether a rewrite at the target loses nothing and is refused for no object,
// as far as is known: nothing is unknown.
func (r *Report) Safe() bool {
	return r.LossCount == 0 && r.RejectedCount == 0 && r.OwnershipLossCount == 0 && len(r.Unknown) == 0
}

// LosesData reports whether objects would lose fields, or whether that is unknown.
func (r *Report) LosesData() bool { return r.LossCount > 0 || len(r.Unknown) > 0 }

// HoldingVersions are the versions the data of crd's objects may be held at and can be read
// at, in priority order: the storage version and the other versions of status.storedVersions,
// the served ones.
func HoldingVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	holding := append([]string{crdinfo.StorageVersion(crd)}, crd.Status.StoredVersions...)
	out := []string{}
	for _, v := range crdinfo.VersionNames(crd) {
		if slices.Contains(holding, v) && crdinfo.IsServed(crd, v) {
			out = append(out, v)
		}
	}
	return out
}

// BackupCommands are the commands that save every object of crd at each of versions, read at
// that version: `kubectl get <plural>.<version>.<group> -A -o yaml > <plural>.<version>.backup.yaml`.
// A plain `kubectl get <plural>` reads at the preferred version, which already prunes what
// that version's schema does not know: it is no backup of data held at another version.
func BackupCommands(group, plural string, versions []string) []string {
	out := make([]string, 0, len(versions))
	for _, v := range versions {
		out = append(out, fmt.Sprintf("kubectl get %s.%s.%s -A -o yaml > %s.%s.backup.yaml", plural, v, group, plural, v))
	}
	return out
}

// Advice says how to keep what the rewrite would lose and how to fix what it would be
// refused, one step a line, in the order to do them. It names no flag of any command: the
// caller adds how to go on anyway.
func Advice(r *Report) []string {
	var out []string
	if r.LossCount > 0 || len(r.Unknown) > 0 {
		out = append(out, "back up the objects at every version that holds their data (a plain kubectl get reads at the preferred version, which already drops those fields):")
		for _, c := range r.Backup {
			out = append(out, "  "+c)
		}
	}
	if r.LossCount > 0 {
		held := map[string]bool{}
		for _, l := range r.Losses {
			held[l.HeldAt] = true
		}
		from := sortedKeys(held)
		out = append(out, fmt.Sprintf("convert the objects listed to the %s shape before the rewrite (the fields listed are not in %s's schema: move their values to the fields %s has for them), e.g. with the conversion tool of the project that owns %s, and apply them at %s; data held at %s is kept until an object is rewritten",
			r.Target, r.Target, r.Target, r.CRD, r.Target, strings.Join(from, ", ")))
	}
	if r.RejectedCount > 0 {
		out = append(out, fmt.Sprintf("fix the objects listed so that a write at %s is accepted (the errors are the API server's), e.g. kubectl edit %s.%s.%s NAME -n NAMESPACE", r.Target, r.Resource, r.Target, r.Group))
	}
	if r.OwnershipLossCount > 0 {
		out = append(out, fmt.Sprintf("the managers listed lose their managedFields entries when the objects are written at %s: the API server cannot type the objects there (kubectl crdver plan lists the values that do not fit, with a patch where they convert without loss) or their entries name a version it cannot convert to; fix that before the rewrite, or re-apply from each manager's source afterwards", r.Target))
	}
	out = append(out, serveAdvice(r)...)
	if len(r.Unknown) > 0 {
		out = append(out, "what is unknown could not be evaluated: make it evaluable (see the reasons) before writing")
	}
	return out
}

// Check evaluates every object of crd (fresh from the cluster) at the target version under
// the live CRD. It writes nothing. It fails only when it cannot complete (the target is not
// a served version, a list fails, ctx ends); what it cannot evaluate is in Report.Unknown.
func Check(ctx context.Context, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition, o Options) (*Report, error) {
	if o.ChunkSize <= 0 {
		o.ChunkSize = 500
	}
	if o.MaxListed <= 0 {
		o.MaxListed = 100
	}
	storage := crdinfo.StorageVersion(crd)
	target := o.Target
	if target == "" {
		target = storage
	}
	v, err := crdinfo.Lookup(crd, target)
	if err != nil {
		return nil, err
	}
	r := &Report{CRD: crd.Name, Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural, Target: target,
		Strategy: convert.Strategy(crd), HoldingVersions: []string{}, Compared: []string{},
		Losses: []Loss{}, Rejected: []Rejection{}, OwnershipLosses: []OwnershipLoss{}, Unknown: []string{}}
	if !v.Served {
		// The rewrite then writes at another served version and the API server converts:
		// not evaluated, so not called safe.
		r.Unknown = append(r.Unknown, fmt.Sprintf("%s is not served: objects are written at another version and converted to it, which the preflight does not evaluate (serve %s to check)", target, target))
		r.Backup = BackupCommands(r.Group, r.Resource, crdinfo.ServedVersions(crd))
		return r, nil
	}

	r.HoldingVersions = HoldingVersions(crd)
	for _, h := range r.HoldingVersions {
		if h != target {
			r.Compared = append(r.Compared, h)
		}
	}
	for _, h := range crd.Status.StoredVersions {
		if crdinfo.Has(crd, h) && !crdinfo.IsServed(crd, h) {
			r.Unknown = append(r.Unknown, unservedStoredUnknown(h))
			r.NotServed = append(r.NotServed, notServed(crd, h))
		}
	}
	for _, h := range crd.Status.StoredVersions {
		if !crdinfo.Has(crd, h) {
			r.Unknown = append(r.Unknown, missingStoredUnknown(h))
		}
	}
	r.Backup = BackupCommands(r.Group, r.Resource, r.HoldingVersions)

	// The CRD as it will be once target is the storage version: what the write is judged by.
	next := crd.DeepCopy()
	for i := range next.Spec.Versions {
		next.Spec.Versions[i].Storage = next.Spec.Versions[i].Name == target
	}
	p, err := preview.NewPreviewer(next)
	if err != nil {
		r.Unknown = append(r.Unknown, fmt.Sprintf("objects not evaluated: %v", err))
		return r, nil
	}
	ownershipOnly := false
	if !o.SkipRejections && len(r.Unknown) == 0 && target == storage && slices.Equal(crd.Status.StoredVersions, []string{target}) {
		// Nothing is pending: every object is stored at the target already, so the rewrite
		// writes each back as it is stored (the API server skips the write when the bytes are
		// the same) and no data held at another version can be lost. A write it would refuse
		// changes nothing: the rewrite lists it as failed.
		ownershipOnly = true
		r.NotNeeded = append(r.NotNeeded, fmt.Sprintf("dry-run writes: nothing is pending (status.storedVersions is [%s], the storage version): every object is stored at %s already and is written back as it reads there; nothing held at another version can be lost, and a write the API server refused would leave its object as it is (the rewrite lists it); only objects whose field ownership a write may drop (values that do not fit a version's typed schema, managedFields of versions the CRD lacks) are sent, for their managedFields", target, target))
	}
	e := &evaluation{ctx: ctx, dyn: dyn, crd: crd, o: o, r: r, p: p, total: -1, compare: r.Compared, ownershipOnly: ownershipOnly}
	if tc, err := NewTypeChecker(next); err == nil {
		e.types = tc
	}
	if o.QPS > 0 {
		e.lim = rate.NewLimiter(rate.Limit(o.QPS), max(1, int(o.QPS)))
	}
	var adm Admission // the zero value: not read (OK false)
	if !o.SkipRejections && len(r.Unknown) == 0 {
		if o.Evidence != "" || r.Strategy == string(apiextensionsv1.NoneConverter) {
			adm = ReadAdmission(ctx, e.dyn, e.wait)
		}
		if o.Evidence != "" && adm.OK && r.Strategy == string(apiextensionsv1.NoneConverter) {
			// With a conversion webhook the verdicts depend on the webhook's code too, which no
			// resourceVersion tracks: no evidence is kept.
			h := evidenceHeaderFor(next, target, adm)
			e.evidence = openEvidence(o.Evidence, h)
			e.record = createEvidence(o.Evidence, h)
		}
	}
	// See proof.go.
	none := r.Strategy == string(apiextensionsv1.NoneConverter)
	if none && len(r.Compared) > 0 && sameSchemas(crd, target, r.Compared) {
		e.compare = nil
		r.NotNeeded = append(r.NotNeeded, fmt.Sprintf("the loss comparison: conversion is None and %s %s %s's schema, so an object reads the same at each: a rewrite at %s drops nothing readable",
			strings.Join(r.Compared, ", "), map[bool]string{true: "has", false: "have"}[len(r.Compared) == 1], target, target))
	}
	if none && !o.SkipRejections && len(r.Unknown) == 0 && adm.OK && !adm.Matches(crd.Spec.Group, crd.Spec.Names.Plural) && !hasTransitionRule(crd, target) {
		e.proven, e.admRead = true, adm.Read
	}

	// The passes run side by side, each with its own LIST (one per version): the dry runs are
	// bound by the API server's write path, the loss comparison (conversion None) by this
	// process's CPU, so the comparison costs no time of its own.
	var wg sync.WaitGroup
	var rejErr error
	base := len(r.Unknown)
	if !o.SkipRejections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.rejections(); err != nil && !errors.Is(err, errStopPass) {
				rejErr = err
			}
		}()
	}
	var lossErr error
	for _, h := range e.compare {
		if r.Strategy == string(apiextensionsv1.WebhookConverter) {
			lossErr = e.webhookLosses(h)
		} else {
			lossErr = e.noneLosses(h)
		}
		if lossErr != nil {
			break
		}
	}
	wg.Wait()
	e.evidence.close()
	if rejErr == nil || errors.Is(rejErr, context.Canceled) {
		e.record.commit() // every line is a verdict the API server gave, even after Ctrl-C
	} else if e.record != nil {
		e.record.err = rejErr
		e.record.commit()
	}
	if e.validated > 0 {
		r.NotNeeded = append(r.NotNeeded, fmt.Sprintf("dry-run writes of %d objects: each is valid under %s's schema (validated here with the API server's code, as a create: stricter than the rewrite's update), %s's schema has no transition rule, and no admission webhook or policy matches updates of %s (%s)",
			e.validated, target, target, crd.Name, e.admRead))
	}
	if e.reused > 0 {
		r.NotNeeded = append(r.NotNeeded, fmt.Sprintf("dry-run writes of %d objects: an earlier preflight found them accepted (evidence in %s) and they have not changed since (same resourceVersion, CRD spec and admission configuration)", e.reused, o.Evidence))
	}
	if e.skipped > 0 {
		r.NotNeeded = append(r.NotNeeded, fmt.Sprintf("checks of the %d objects up to %s: the interrupted rewrite wrote them already, and this run goes on after them", e.skipped, o.After))
	}
	r.DryRunInFlight = e.inFlight
	if len(e.rejUnknown) > 0 {
		r.Unknown = append(append(append([]string{}, r.Unknown[:base]...), e.rejUnknown...), r.Unknown[base:]...)
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if rejErr != nil {
		return r, rejErr
	}
	if lossErr != nil {
		return r, lossErr
	}
	sort.SliceStable(r.Losses, func(i, j int) bool {
		return objKey(r.Losses[i].Namespace, r.Losses[i].Name) < objKey(r.Losses[j].Namespace, r.Losses[j].Name)
	})
	sort.SliceStable(r.OwnershipLosses, func(i, j int) bool {
		return objKey(r.OwnershipLosses[i].Namespace, r.OwnershipLosses[i].Name) < objKey(r.OwnershipLosses[j].Namespace, r.OwnershipLosses[j].Name)
	})
	sort.SliceStable(r.Rejected, func(i, j int) bool {
		return objKey(r.Rejected[i].Namespace, r.Rejected[i].Name) < objKey(r.Rejected[j].Namespace, r.Rejected[j].Name)
	})
	return r, nil
}

type evaluation struct {
	ctx context.Context
	dyn dynamic.Interface
	crd *apiextensionsv1.CustomResourceDefinition
	o   Options
	r   *Report
	p   *preview.Previewer
	lim *rate.Limiter // nil: no client-side limit
	// compare are the versions the loss pass lists (Report.Compared unless proven needless);
	// proven: objects valid in-process need no dry run (proof.go).
	compare []string
	proven  bool
	// ownershipOnly: nothing is pending; only objects at risk of losing field managers are
	// sent, for their managedFields (refusals are not findings then). types types objects as
	// the API server does (nil: every object with managedFields is at risk).
	ownershipOnly bool
	types         *TypeChecker
	admRead       string // the admission configurations read, for the report
	validated     int64  // objects proven valid in-process (set by the dry-run pass's lister)
	// evidence is an earlier check's (nil: none usable); record is this one's (nil: none kept).
	evidence *evidenceReader
	record   *evidenceWriter
	// skipped counts the objects up to Options.After; reused those the evidence vouched for.
	skipped, reused int64

	// mu guards done, total and the progress calls: the passes run side by side.
	mu          sync.Mutex
	done, total int64
	// what the dry-run pass could not evaluate and how many writes it had in flight, read
	// once it ended (Report.Unknown lists them before the loss pass's).
	rejUnknown []string
	inFlight   *migrate.InFlight
}

func (e *evaluation) progress(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.done += int64(n)
	if e.o.Progress != nil {
		e.o.Progress(e.done, e.total)
	}
}

// unknown records what the loss pass could not evaluate (it runs on Check's goroutine).
func (e *evaluation) unknown(s string) { e.r.Unknown = append(e.r.Unknown, s) }

// eachPage lists the objects at version v a page at a time and hands each page to fn (and,
// when progress is set, counts it as evaluated). The pager follows an expired continue token
// (410) and retries transient errors after a back-off.
func (e *evaluation) eachPage(ctx context.Context, v string, progress bool, fn func([]unstructured.Unstructured) error) error {
	pg := pager.Dynamic(e.dyn.Resource(crdinfo.GVR(e.crd, v)), pager.Options{Limit: e.o.ChunkSize, Wait: e.wait, MaxAttempts: maxAttempts})
	for first := true; ; first = false {
		list, err := pg.Next(ctx)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("listing %s at %s: %w", e.crd.Name, v, err)
		}
		if first {
			e.mu.Lock()
			if n := pg.Total(); n >= 0 && e.total < 0 {
				passes := int64(len(e.compare))
				if !e.o.SkipRejections {
					passes++
				}
				e.total = n * passes
			}
			e.mu.Unlock()
		}
		if err := fn(list.Items); err != nil {
			return err
		}
		if progress {
			e.progress(len(list.Items))
		}
	}
}

// rejections sends the rewrite's write of every object, read at the target, as a
// server-side dry run: the API server runs its whole update path (decoding, defaulting,
// validation with ratcheting against the object as it holds it, admission webhooks) and
// writes nothing. The preview engine's update models that path, but the old object the API
// server ratchets against is decoded from etcd at the version it is encoded at, which a model
// from the listed object cannot see (a field the target dropped makes the object "changed"):
// the API server itself is the oracle. Validation is at the request version, so the answer
// is the same before and after the storage switch.
//
// The dry runs stream like the rewrite's writes: one goroutine lists the pages (the next page
// is listed while this one is checked), the writes in flight are bounded by a migrate.Gate
// (adaptive unless Options.Concurrency is set, cut on 429s), transient errors are retried
// with the rewrite's back-off, and the outcomes are folded into the report page by page in
// list order (the first MaxListed findings are the same whatever the timing). Memory is
// bounded by about two pages.
func (e *evaluation) rejections() error {
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ri := e.dyn.Resource(crdinfo.GVR(e.crd, e.r.Target))
	gate := migrate.NewGate(e.o.Concurrency, e.o.Throttled)

	type outcome struct {
		errs         []string
		unknown      string
		err          error
		skip, reused bool
		fine         bool     // needs no dry run: counted only
		lost         []string // managers the dry run's managedFields lack
		reset        bool
	}
	type dryPage struct {
		items     []unstructured.Unstructured
		out       []outcome
		remaining atomic.Int64
		done      chan struct{}
	}
	type job struct {
		p *dryPage
		i int
	}
	pages := make(chan *dryPage, 1)
	var dryRuns atomic.Int64
	work := make(chan job, e.o.ChunkSize)
	var listErr error
	go func() {
		defer close(pages)
		defer close(work)
		listErr = e.eachPage(ctx, e.r.Target, false, func(items []unstructured.Unstructured) error {
			p := &dryPage{items: items, out: make([]outcome, len(items)), done: make(chan struct{})}
			send := make([]int, 0, len(items))
			for i := range items {
				u := &items[i]
				key := migrate.ObjectKey(u.GetNamespace(), u.GetName())
				switch {
				case e.o.After != "" && key <= e.o.After:
					p.out[i].skip = true
				case e.ownershipOnly && !e.atRisk(u):
					p.out[i].fine = true
				case e.evidence.accepted(key, u.GetResourceVersion()) && !e.atRisk(u):
					p.out[i].reused = true
				case e.proven && !e.atRisk(u) && validIn(ctx, e.p, u):
					e.validated++
				default:
					send = append(send, i)
				}
			}
			p.remaining.Store(int64(len(send)))
			if len(send) == 0 {
				close(p.done)
			}
			select {
			case pages <- p:
			case <-ctx.Done():
				return ctx.Err()
			}
			for _, i := range send {
				select {
				case work <- job{p, i}:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}()
	var wg sync.WaitGroup
	for w := 0; w < gate.Workers(); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				if ctx.Err() == nil {
					dryRuns.Add(1)
					o := &j.p.out[j.i]
					var res *unstructured.Unstructured
					o.errs, o.unknown, res, o.err = e.dryRun(ctx, gate, ri, &j.p.items[j.i])
					if res != nil {
						o.lost, o.reset = LostManagers(j.p.items[j.i].GetManagedFields(), res.GetManagedFields())
					}
				}
				if j.p.remaining.Add(-1) == 0 {
					close(j.p.done)
				}
			}
		}()
	}
	defer func() {
		cancel()
		for range pages {
		}
		wg.Wait()
		e.r.DryRuns = dryRuns.Load()
		if e.r.DryRuns > 0 {
			snap := gate.Snapshot()
			e.inFlight = &snap
		}
	}()
	for p := range pages {
		select {
		case <-p.done:
		case <-ctx.Done():
		}
		if err := e.ctx.Err(); err != nil {
			return err
		}
		for i := range p.items {
			if p.out[i].skip {
				e.skipped++
				continue
			}
			e.r.Objects++
			if p.out[i].reused {
				e.reused++
			}
			if p.out[i].fine {
				continue
			}
			if o := p.out[i]; len(o.lost) > 0 {
				e.ownershipLost(&p.items[i], o.lost, o.reset)
			}
			if e.ownershipOnly && p.out[i].errs != nil {
				continue // a refused write leaves the object as it is (see Check)
			}
			switch o := p.out[i]; {
			case o.err != nil:
				return o.err
			case o.unknown != "":
				e.rejUnknown = append(e.rejUnknown, o.unknown)
				return errStopPass
			case o.errs != nil:
				e.rejected(&p.items[i], o.errs)
			case len(o.lost) > 0:
				// Not evidence: the dry run must be sent again next time.
			default:
				e.record.add(migrate.ObjectKey(p.items[i].GetNamespace(), p.items[i].GetName()), p.items[i].GetResourceVersion())
			}
		}
		e.progress(len(p.items))
	}
	if err := e.ctx.Err(); err != nil {
		return err
	}
	return listErr
}

// dryRun sends u's write at the target as a dry run: the API server's reasons when it would
// be rejected (nil when accepted or gone), or why the answer is unknown (no right to update).
// Each write holds a slot of gate; 429s, 5xx and timeouts are retried after the rewrite's
// back-off (migrate.Backoff). ctx ends it at once: nothing is written either way.
func (e *evaluation) dryRun(ctx context.Context, gate *migrate.Gate, ri dynamic.NamespaceableResourceInterface, u *unstructured.Unstructured) ([]string, string, *unstructured.Unstructured, error) {
	var w dynamic.ResourceInterface = ri
	if ns := u.GetNamespace(); ns != "" {
		w = ri.Namespace(ns)
	}
	for attempt := 1; ; attempt++ {
		if err := e.wait(ctx); err != nil {
			return nil, "", nil, err
		}
		if err := gate.Acquire(ctx); err != nil {
			return nil, "", nil, err
		}
		// The write the rewrite sends: its managedFields entries of other versions moved to the
		// target within it (a write that keeps them makes servers before 1.37 drop them all
		// where the object, with the target's defaults, does not fit their version's schema).
		send, _ := migrate.MoveEntries(ctx, e.dyn, e.crd, e.r.Target, u)
		sent := time.Now()
		res, err := w.Update(ctx, send, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		gate.Release(time.Since(sent), apierrors.IsTooManyRequests(err))
		switch {
		case err == nil:
			return nil, "", res, nil
		case apierrors.IsNotFound(err):
			return nil, "", nil, nil
		case ctx.Err() != nil:
			return nil, "", nil, ctx.Err()
		case apierrors.IsConflict(err) && attempt < maxAttempts:
			// Changed since listed: judge it as it is now.
			fresh, gerr := e.get(ctx, w, u.GetName())
			if apierrors.IsNotFound(gerr) {
				return nil, "", nil, nil
			}
			if gerr != nil {
				return nil, "", nil, fmt.Errorf("%s: reading it at %s: %w", objKey(u.GetNamespace(), u.GetName()), e.r.Target, gerr)
			}
			u = fresh
		case apistatus.Refused(err):
			return statusTexts(err), "", nil, nil
		case apierrors.IsForbidden(err):
			// No right to update (a dry run needs the rights a write needs): the rest would be
			// refused alike.
			return nil, fmt.Sprintf("whether the API server accepts writes at %s is unknown: a dry-run write needs update rights on %s (%s)", e.r.Target, e.crd.Spec.Names.Plural, statusTexts(err)[0]), nil, nil
		case migrate.Retryable(err) && attempt < maxAttempts:
			if serr := migrate.Sleep(ctx, migrate.Backoff(err, attempt)); serr != nil {
				return nil, "", nil, serr
			}
		default:
			return nil, "", nil, fmt.Errorf("%s: a dry-run write at %s (nothing is written): %w", objKey(u.GetNamespace(), u.GetName()), e.r.Target, err)
		}
	}
}

// maxAttempts bounds the requests for one object on conflicts and on 429/5xx (the rewrite's
// default).
const maxAttempts = 8

// get reads one object, retrying transient errors.
func (e *evaluation) get(ctx context.Context, w dynamic.ResourceInterface, name string) (*unstructured.Unstructured, error) {
	for attempt := 1; ; attempt++ {
		if err := e.wait(ctx); err != nil {
			return nil, err
		}
		obj, err := w.Get(ctx, name, metav1.GetOptions{})
		if err == nil || ctx.Err() != nil || !migrate.Retryable(err) || attempt >= maxAttempts {
			return obj, err
		}
		if err := migrate.Sleep(ctx, migrate.Backoff(err, attempt)); err != nil {
			return nil, err
		}
	}
}

// wait honours Options.QPS (no limit without it).
func (e *evaluation) wait(ctx context.Context) error {
	if e.lim == nil {
		return ctx.Err()
	}
	return e.lim.Wait(ctx)
}

// statusTexts are the API server's reasons: "field: message" per cause, else its message.
func statusTexts(err error) []string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		if d := st.Status().Details; d != nil && len(d.Causes) > 0 {
			out := make([]string, 0, len(d.Causes))
			for _, c := range d.Causes {
				if c.Field != "" && !strings.HasPrefix(c.Message, c.Field) {
					out = append(out, c.Field+": "+c.Message)
				} else {
					out = append(out, c.Message)
				}
			}
			return out
		}
		if m := st.Status().Message; m != "" {
			return []string{m}
		}
	}
	return []string{err.Error()}
}

// errStopPass ends a pass early without failing the check.
var errStopPass = errors.New("pass stopped")

func (e *evaluation) rejected(u *unstructured.Unstructured, errs []string) {
	e.r.RejectedCount++
	if len(e.r.Rejected) < e.o.MaxListed {
		e.r.Rejected = append(e.r.Rejected, Rejection{Namespace: u.GetNamespace(), Name: u.GetName(), Errors: errs})
	}
}

func (e *evaluation) ownershipLost(u *unstructured.Unstructured, lost []string, reset bool) {
	e.r.OwnershipLossCount++
	if len(e.r.OwnershipLosses) < e.o.MaxListed {
		e.r.OwnershipLosses = append(e.r.OwnershipLosses, OwnershipLoss{Namespace: u.GetNamespace(), Name: u.GetName(), Lost: lost, Reset: reset})
	}
}

func (e *evaluation) lost(ns, name, heldAt string, fields []string) {
	e.r.LossCount++
	if len(e.r.Losses) < e.o.MaxListed {
		e.r.Losses = append(e.r.Losses, Loss{Namespace: ns, Name: name, HeldAt: heldAt, Fields: fields})
	}
}

// added records an object whose conversion adds or normalises (changes, from
// convert.Change or convert.Difference, by Kind and Path): reported, not a loss. count
// counts it in AddedCount (a webhook's round trips are counted by convert).
func (e *evaluation) added(ns, name, heldAt string, kinds, paths []string, count bool) {
	a := Addition{Namespace: ns, Name: name, HeldAt: heldAt}
	for i, p := range paths {
		if kinds[i] == convert.DiffNormalised {
			if !slices.Contains(a.Normalised, p) {
				a.Normalised = append(a.Normalised, p)
			}
		} else if !slices.Contains(a.Added, p) {
			a.Added = append(a.Added, p)
		}
	}
	if count {
		e.r.AddedCount++
	}
	if len(e.r.Added) < e.o.MaxListed {
		e.r.Added = append(e.r.Added, a)
	}
}

// noneLosses: conversion None. Every object as read at h, then read at the target by the API
// server's read path (decoded at h, apiVersion switched, pruned in the target's schema): the
// fields present at h and absent at the target are lost.
func (e *evaluation) noneLosses(h string) error {
	return e.eachPage(e.ctx, h, true, func(items []unstructured.Unstructured) error {
		for i := range items {
			u := &items[i]
			if e.o.After != "" && migrate.ObjectKey(u.GetNamespace(), u.GetName()) <= e.o.After {
				continue
			}
			body, err := u.MarshalJSON()
			if err != nil {
				return err
			}
			rr, err := e.p.Read(body, e.r.Target)
			if err != nil {
				e.unknown(fmt.Sprintf("%s: reading it at %s: %v", objKey(u.GetNamespace(), u.GetName()), e.r.Target, err))
				continue
			}
			lost, kinds, added := compareAt(u.Object, rr.Object)
			if len(lost) > 0 {
				e.lost(u.GetNamespace(), u.GetName(), h, lost)
			}
			if len(added) > 0 {
				e.added(u.GetNamespace(), u.GetName(), h, kinds, added, true)
			}
		}
		return nil
	})
}

// compareAt compares an object as held with the same object as read at the target, outside
// apiVersion, kind and metadata, by convert's loss rule (convert.Diff, Difference.Loss): lost
// are the paths whose difference is a loss (a field gone, a value or type changed, a list of
// another length); added the paths added or normalised, with their kinds.
func compareAt(held, at map[string]any) (lost, kinds, added []string) {
	strip := func(m map[string]any) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			if k != "apiVersion" && k != "kind" && k != "metadata" {
				out[k] = v
			}
		}
		return out
	}
	for _, d := range convert.Diff(strip(held), strip(at)) {
		if d.Loss() {
			lost = append(lost, d.Path)
		} else {
			kinds, added = append(kinds, d.Kind), append(added, d.Path)
		}
	}
	return lost, kinds, added
}

// webhookLosses: a conversion webhook. Every object as read at h goes h → target → h through
// the webhook with the API server's response checks; what the round trip loses (convert's
// loss rule) is lost. A field the target's schema prunes from the webhook's answer is lost
// only when the round trip loses it too: the way back starts from the pruned object, so what
// the target no longer holds in any form is missing there (a field the webhook writes twice,
// as cert-manager's v1alpha2 spec.organization and spec.subject.organizations, is not).
func (e *evaluation) webhookLosses(h string) error {
	if e.o.Transport == nil {
		e.unknown(fmt.Sprintf("objects held at %s: the conversion webhook was not reached (no way to reach it was given), so what converting them to %s loses is unknown", h, e.r.Target))
		return nil
	}
	src := &progressSource{src: convert.NewClusterSource(e.dyn, e.crd, h, convert.Selection{AllNamespaces: true, PageSize: e.o.ChunkSize}), e: e}
	rep, err := convert.RunSource(e.ctx, convert.Options{CRD: e.crd, To: e.r.Target, RoundTrip: true, Transport: e.o.Transport,
		MaxAdded: 64 * e.o.MaxListed}, src) // what round trips add: listed for MaxListed objects at most, so memory stays bounded
	if err != nil {
		return fmt.Errorf("round-tripping the objects held at %s through the conversion webhook: %w", h, err)
	}
	if rep.Unreachable != "" {
		e.unknown(fmt.Sprintf("objects held at %s: the conversion webhook could not be reached (%s), so what converting them to %s loses is unknown", h, rep.Unreachable, e.r.Target))
		return nil
	}
	byObject := map[string][]string{}
	var order []string
	other := map[string]int{}
	for _, f := range rep.Findings {
		switch {
		case f.Check == convert.CheckPruned:
			// Judged by the round trip (above).
		case f.Check == convert.CheckRoundTrip:
			if _, ok := byObject[f.Object]; !ok {
				order = append(order, f.Object)
			}
			path := f.Path
			if path == "" {
				path = "."
			}
			if !slices.Contains(byObject[f.Object], path) {
				byObject[f.Object] = append(byObject[f.Object], path)
			}
		case f.Severity == convert.SeverityError:
			other[f.Check]++
		}
	}
	split := func(obj string) (string, string) {
		if ns, name, ok := strings.Cut(obj, "/"); ok {
			return ns, name
		}
		return "", obj
	}
	for _, obj := range order {
		ns, name := split(obj)
		e.lost(ns, name, h, byObject[obj])
	}
	// What the round trip added or normalised (convert's loss rule): reported, not a loss.
	e.r.AddedCount += int64(rep.AddedObjects)
	var addedOrder []string
	addedKinds, addedPaths := map[string][]string{}, map[string][]string{}
	for _, c := range rep.Added {
		if _, ok := addedPaths[c.Object]; !ok {
			addedOrder = append(addedOrder, c.Object)
		}
		addedKinds[c.Object] = append(addedKinds[c.Object], c.Kind)
		addedPaths[c.Object] = append(addedPaths[c.Object], c.Path)
	}
	for _, obj := range addedOrder {
		ns, name := split(obj)
		e.added(ns, name, h, addedKinds[obj], addedPaths[obj], false)
	}
	checks := make([]string, 0, len(other))
	for c := range other {
		checks = append(checks, c)
	}
	sort.Strings(checks)
	for _, c := range checks {
		e.unknown(fmt.Sprintf("objects held at %s: the conversion webhook failed check %s on %d objects (kubectl crdver convert %s --to %s --from-cluster --round-trip shows them): the API server would fail those conversions too", h, c, other[c], e.crd.Name, e.r.Target))
	}
	return nil
}

// progressSource counts the pages of a convert source for the progress callback.
type progressSource struct {
	src convert.Source
	e   *evaluation
}

func (s *progressSource) Next(ctx context.Context) ([]convert.Object, error) {
	page, err := s.src.Next(ctx)
	if err == nil {
		s.e.progress(len(page))
	}
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	return page, err
}

func objKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
