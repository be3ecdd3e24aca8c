package convert

// run.go: the request pipeline: objects grouped by version, batched, sent one request at a
// time while earlier responses are checked, and the round trip back.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"io"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// DefaultBatchSize is how many objects go in one ConversionReview: the API server converts a
// list page in one request, and kubectl pages by 500.
const DefaultBatchSize = 500

// Object is one custom resource to convert.
type Object struct {
	// Source names the object in findings: "file.yaml (document 2)" or "namespace/name".
	Source string
	Object map[string]any
}

// Options of a run.
type Options struct {
	CRD *apiextensionsv1.CustomResourceDefinition
	// To is the target version (a name in spec.versions).
	To string
	// ReviewVersion is the ConversionReview version to send (v1 or v1beta1); empty: the
	// first of spec.conversion.webhook.conversionReviewVersions that is supported, as the
	// API server does.
	ReviewVersion string
	// BatchSize is the number of objects per request (0: DefaultBatchSize).
	BatchSize int
	// RoundTrip converts every object back to its own version and diffs the result.
	RoundTrip bool
	// MaxAdded bounds the changes Report.Added keeps (what round trips added or normalised,
	// which is no loss), so that memory stays bounded over many objects; 0 keeps every one.
	// Report.AddedObjects counts the objects all the same.
	MaxAdded int
	// Transport reaches the webhook; unused (may be nil) for strategy None.
	Transport Transport
	// NewUID makes request UIDs (nil: random UUIDs, like the API server).
	NewUID func() types.UID
	// Progress, when set, is called after each batch has been sent (and sent back, for
	// round trips) with the number of objects done so far and the number to send (0 when
	// the source does not know it). It is called from one goroutine.
	Progress func(done, total int)
	// BisectRequests bounds the extra requests sent, over the whole run, to find the objects
	// to blame when a request fails as a whole (0: DefaultBisectRequests; negative: none).
	BisectRequests int
	// Page, when set, is given each page's results as the page completes, on the calling
	// goroutine, in the order a single page would report them: its findings, and the objects
	// of the page that Report.Keep would give (failed, or blamed by a bisection). The Report
	// then keeps neither (its Findings and Failed stay empty; FailedObjects counts them), so
	// memory stays bounded by a page whatever the number of objects. An error of Page stops
	// the run and is returned.
	Page func(PageResult) error
	// Converted, when set, is called once per object that came back from the way there, on
	// the calling goroutine after its page: sent is the object as sent (pruned and defaulted
	// in its own version, as the API server would have stored it), converted what the run
	// made of it. Whether the object failed a check is in the report (Findings, Failed).
	Converted func(source string, sent, converted map[string]any)
}

// PageResult is what one page of a run found (Options.Page).
type PageResult struct {
	// Report is the run's report so far: what it converts and how (CRD, Strategy, Webhook,
	// ReviewVersion, To, RoundTrip) is final; the counts are not.
	Report *Report
	// Findings are the page's failed checks, in the report's order.
	Findings []Finding
	// Keep are the page's objects that reproduce its failures (Report.Keep's rule).
	Keep []FailedObject
}

// item is one object on its way through the checks.
type item struct {
	index   int // position in the input
	source  string
	version string // its own version (for round trips)
	orig    map[string]any
	raw     []byte
	failed  bool // failed a check of its own
	// wholeFailed: its request failed as a whole (HTTP error, result Failure, ...), which
	// says nothing about this object by itself; bisection finds the ones to blame.
	wholeFailed bool
	// bisected: a bisection of its request looked for the objects to blame.
	bisected bool
	// convRaw is the webhook's bytes for this object; reusable says they are what the API
	// server would use (no metadata restored, nothing pruned), so a round trip can send them
	// back as they are instead of encoding the object again.
	convRaw  []byte
	reusable bool
	// original is, for the way back of a round trip, the object as it was first sent, and
	// input the item it was sent as.
	original map[string]any
	input    *item
}

// inputObject is the object as given (the way there) for an item of either leg.
func (it *item) inputObject() map[string]any {
	if it.input != nil {
		return it.input.orig
	}
	return it.orig
}

type runner struct {
	opts     Options
	crd      *apiextensionsv1.CustomResourceDefinition
	group    string
	kind     string
	review   string
	schemas  map[string]*versionSchema
	tally    *tally
	report   *Report
	none     bool
	newUID   func() types.UID
	stop     bool
	requests int

	// Across pages: objects seen, done (for progress) and the total when known (0: unknown).
	seen, done, total int
	inputPruned       int
	failed            []*item
	bisectLeft        int
	// bisections is the number of the report's bisections already given to Options.Page.
	bisections int
}

// Run converts objects to opts.To (and back with opts.RoundTrip) and checks everything. The
// error is for a run that cannot start (unknown version, object of another kind); what goes
// wrong with the webhook is in the report (Unreachable when it could not be reached).
func Run(ctx context.Context, opts Options, objects []Object) (*Report, error) {
	return RunSource(ctx, opts, SliceSource(objects))
}

// RunSource is Run over objects read a page at a time: each page is batched, sent, checked
// (and bisected) before the next is read, so memory is bounded by a page (and, without
// Options.Page, the findings and failed objects kept for the report). An error of src is
// returned as it is. When ctx ends the run, the report of the pages done so far comes with
// ctx's error (Objects counts those pages' objects).
func RunSource(ctx context.Context, opts Options, src Source) (*Report, error) {
	r, err := newRunner(opts, false)
	if err != nil {
		return nil, err
	}
	if t, ok := src.(interface{ Total() int }); ok {
		r.total = t.Total()
	}
	for {
		if err := ctx.Err(); err != nil {
			return r.finishRun(), err
		}
		page, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return r.finishRun(), ctx.Err()
			}
			return nil, err
		}
		if err := r.page(ctx, page); err != nil {
			if ctx.Err() != nil {
				return r.finishRun(), ctx.Err()
			}
			return nil, err
		}
		if r.stop {
			// Unreachable: what is left is not sent. Count it without keeping it.
			for {
				rest, err := src.Next(ctx)
				if err != nil {
					break
				}
				r.seen += len(rest)
				r.report.NotSent += len(rest)
			}
			break
		}
	}
	return r.finishRun(), nil
}

// newRunner prepares a run. viaServer: the API server calls the webhook (no transport, no
// review version of our own).
func newRunner(opts Options, viaServer bool) (*runner, error) {
	crd := opts.CRD
	if crd == nil {
		return nil, errors.New("no CustomResourceDefinition given")
	}
	r := &runner{opts: opts, crd: crd, group: crd.Spec.Group, kind: crd.Spec.Names.Kind, schemas: map[string]*versionSchema{}, tally: newTally(), newUID: opts.NewUID}
	r.tally.maxAdded = opts.MaxAdded
	if r.newUID == nil {
		r.newUID = uuid.NewUUID
	}
	if r.opts.BatchSize <= 0 {
		r.opts.BatchSize = DefaultBatchSize
	}
	r.bisectLeft = r.opts.BisectRequests
	if r.bisectLeft == 0 {
		r.bisectLeft = DefaultBisectRequests
	}
	if !r.hasVersion(opts.To) {
		return nil, crdinfo.NotFound(crd, opts.To)
	}
	for _, v := range crd.Spec.Versions {
		s, err := newVersionSchema(crd, v.Name)
		if err != nil {
			return nil, err
		}
		r.schemas[v.Name] = s
	}
	r.report = &Report{CRD: crd.Name, Strategy: Strategy(crd), To: opts.To, RoundTrip: opts.RoundTrip, Findings: []Finding{}}
	if r.report.Strategy == string(apiextensionsv1.NoneConverter) {
		r.none = true
		r.report.Notes = append(r.report.Notes,
			"spec.conversion.strategy is None: there is no webhook; the API server converts by changing apiVersion only, then prunes what the target version's schema does not know")
		return r, nil
	}
	if viaServer {
		return r, nil
	}
	if opts.Transport == nil {
		return nil, fmt.Errorf("%s: no way to reach the conversion webhook was given", crd.Name)
	}
	r.review = opts.ReviewVersion
	if r.review == "" {
		rv, err := ReviewVersionFor(crd)
		if err != nil {
			return nil, err
		}
		r.review = rv
	} else if r.review != "v1" && r.review != "v1beta1" {
		return nil, fmt.Errorf("ConversionReview version %q is not supported: use v1 or v1beta1", r.review)
	}
	r.report.ReviewVersion = r.review
	r.report.Webhook = opts.Transport.Describe()
	return r, nil
}

func (r *runner) hasVersion(v string) bool {
	_, ok := r.versionOf(v)
	return ok
}

func (r *runner) versionOf(v string) (*apiextensionsv1.CustomResourceDefinitionVersion, bool) {
	for i := range r.crd.Spec.Versions {
		if r.crd.Spec.Versions[i].Name == v {
			return &r.crd.Spec.Versions[i], true
		}
	}
	return nil, false
}

func (r *runner) versionNames() []string {
	var out []string
	for _, v := range r.crd.Spec.Versions {
		out = append(out, v.Name)
	}
	return out
}

func (r *runner) apiVersion(v string) string { return r.group + "/" + v }

// page sends, checks and bisects one page of objects, and keeps only what the report needs.
func (r *runner) page(ctx context.Context, objects []Object) error {
	// Group by the objects' own version, keeping the input order within each group. Each
	// object is only admitted here (an object of another kind fails the run before anything
	// is sent); making it what the API server would send is done batch by batch, ahead of
	// the requests (pipeline).
	groups := map[string][]*item{}
	var order []string
	offset := r.seen
	skipped := 0
	for i, o := range objects {
		v, skip, err := r.admit(o)
		if err != nil {
			return err
		}
		if skip {
			skipped++
			continue
		}
		if _, ok := groups[v]; !ok {
			order = append(order, v)
		}
		groups[v] = append(groups[v], &item{index: offset + i, source: o.Source, version: v, orig: o.Object})
	}
	var batches []*batch
	for _, v := range order {
		items := groups[v]
		for start := 0; start < len(items); start += r.opts.BatchSize {
			batches = append(batches, &batch{items: items[start:min(start+r.opts.BatchSize, len(items))], from: v, t1: newTally(), t2: newTally()})
		}
	}
	if err := r.pipeline(ctx, batches); err != nil {
		return err
	}
	// Requests that failed as a whole: find the objects to blame, one request at a time.
	for _, b := range batches {
		for _, x := range []*exchange{b.x1, b.x2} {
			if x == nil || x.whole == nil || !bisectable(x.whole.Check) || len(x.items) < 2 || r.bisectLeft <= 0 || r.opts.BisectRequests < 0 {
				continue
			}
			r.report.Bisections = append(r.report.Bisections, r.bisect(ctx, x))
			for _, it := range x.items {
				it.bisected = true
				if it.input != nil {
					it.input.bisected = true
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The page is done: it counts.
	r.seen += len(objects)
	r.report.Skipped += skipped
	var failed []*item
	for _, b := range batches {
		select {
		case <-b.prepared: // prepared, sent or not: its pruned inputs count
			r.inputPruned += b.inputPruned
		default:
		}
		if r.opts.Converted != nil {
			for i, o := range b.out {
				if o != nil {
					r.opts.Converted(b.items[i].source, b.items[i].orig, o)
				}
			}
		}
		r.tally.merge(b.t1)
		r.tally.merge(b.t2)
		// Left unsent when the webhook became unreachable: neither passed nor failed.
		unsent := map[*item]bool{}
		if b.x1 == nil {
			for _, it := range b.items {
				unsent[it] = true
			}
		} else if r.opts.RoundTrip && b.x2 == nil {
			for _, it := range b.backOrig {
				unsent[it] = true
			}
		}
		for _, it := range b.items {
			switch {
			case it.failed || it.wholeFailed:
				failed = append(failed, it)
			case unsent[it]:
				r.report.NotSent++
			default:
				r.report.Converted++
			}
		}
	}
	r.report.FailedObjects += len(failed)
	if r.opts.Page == nil {
		r.failed = append(r.failed, failed...)
		return nil
	}
	return r.flushPage(failed)
}

// flushPage gives Options.Page what the page found, and forgets it: the findings, and the
// page's objects that reproduce its failures.
func (r *runner) flushPage(failed []*item) error {
	sort.SliceStable(failed, func(i, j int) bool { return failed[i].index < failed[j].index })
	fo := make([]FailedObject, 0, len(failed))
	for _, it := range failed {
		fo = append(fo, FailedObject{Source: it.source, Object: it.orig, Bisected: !it.failed && it.bisected})
	}
	bs := r.report.Bisections[r.bisections:]
	res := PageResult{Report: r.report, Findings: r.tally.findings, Keep: keep(fo, bs)}
	r.tally.findings = nil
	for i := range bs {
		bs[i].Culprits = nil // given with this page: not kept
	}
	r.bisections = len(r.report.Bisections)
	return r.opts.Page(res)
}

// prepare checks that o is an object of the CRD and makes it what the API server would send:
// pruned and defaulted in its own version, as it would have been stored, and encoded. It
// returns nil for an object already at the target version (the API server never sends those).
func (r *runner) prepare(o Object) (*item, error) {
	v, skip, err := r.admit(o)
	if err != nil || skip {
		return nil, err
	}
	it := &item{source: o.Source, version: v, orig: o.Object}
	pruned, err := r.encode(it)
	if err != nil {
		return nil, err
	}
	if pruned {
		r.inputPruned++
	}
	return it, nil
}

// admit checks that o is an object of the CRD and returns its version; skip: it is already at
// the target version (the API server never sends those).
func (r *runner) admit(o Object) (version string, skip bool, err error) {
	av, _ := o.Object["apiVersion"].(string)
	kind, _ := o.Object["kind"].(string)
	g, v, _ := strings.Cut(av, "/")
	if g != r.group || !r.hasVersion(v) {
		return "", false, fmt.Errorf("%s: apiVersion %q is not a version of %s (have: %s)", o.Source, av, r.crd.Name, r.joinAPIVersions())
	}
	if kind != r.kind {
		return "", false, fmt.Errorf("%s: kind %q is not %s's kind %q", o.Source, kind, r.crd.Name, r.kind)
	}
	return v, v == r.opts.To, nil
}

// encode makes it.orig (the object as given, left untouched) what the API server would send:
// a copy pruned and defaulted in its own version, as it would have been stored, encoded in
// it.raw. pruned: the schema pruned something of the input. It is safe to call for different
// items at once.
func (r *runner) encode(it *item) (pruned bool, err error) {
	obj := runtime.DeepCopyJSON(it.orig)
	pruned = len(r.schemas[it.version].pruneObject(obj, true)) > 0
	r.schemas[it.version].defaultObject(obj)
	raw, err := json.Marshal(obj)
	if err != nil {
		return pruned, fmt.Errorf("%s: %w", it.source, err)
	}
	it.orig, it.raw = obj, raw
	return pruned, nil
}

// finishRun adds the notes and failed objects of all pages and completes the report.
func (r *runner) finishRun() *Report {
	r.report.Objects = r.seen
	if r.inputPruned > 0 {
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("%d input object(s) had fields their own version's schema does not know: they were pruned before sending, as the API server would on create", r.inputPruned))
	}
	if r.report.Skipped > 0 {
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("%d object(s) already at %s were not sent (the API server never sends them)", r.report.Skipped, r.opts.To))
	}
	sort.SliceStable(r.failed, func(i, j int) bool { return r.failed[i].index < r.failed[j].index })
	for _, it := range r.failed {
		r.report.Failed = append(r.report.Failed, FailedObject{Source: it.source, Object: it.orig, Bisected: !it.failed && it.bisected})
	}
	return r.finish()
}

func (r *runner) joinAPIVersions() string {
	var out []string
	for _, v := range r.versionNames() {
		out = append(out, r.apiVersion(v))
	}
	return strings.Join(out, ", ")
}
