package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
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
	// Transport reaches the webhook; unused (may be nil) for strategy None.
	Transport Transport
	// NewUID makes request UIDs (nil: random UUIDs, like the API server).
	NewUID func() types.UID
	// Progress, when set, is called after each batch has been sent (and sent back, for
	// round trips) with the number of objects done so far and the number to send. It is
	// called from one goroutine.
	Progress func(done, total int)
}

// ReviewVersionFor returns the ConversionReview version the API server would send for crd:
// the first of conversionReviewVersions that it supports.
func ReviewVersionFor(crd *apiextensionsv1.CustomResourceDefinition) (string, error) {
	c := crd.Spec.Conversion
	if c == nil || c.Webhook == nil {
		return "", fmt.Errorf("%s: spec.conversion.webhook is not set", crd.Name)
	}
	for _, v := range c.Webhook.ConversionReviewVersions {
		if v == "v1" || v == "v1beta1" {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s: spec.conversion.webhook.conversionReviewVersions %v holds no supported version (v1, v1beta1): the API server cannot call this webhook either", crd.Name, c.Webhook.ConversionReviewVersions)
}

// Strategy returns spec.conversion.strategy (None when unset).
func Strategy(crd *apiextensionsv1.CustomResourceDefinition) string {
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy == "" {
		return string(apiextensionsv1.NoneConverter)
	}
	return string(crd.Spec.Conversion.Strategy)
}

// BuildReview marshals a ConversionReview request of the given version (v1 or v1beta1).
// objects are JSON objects.
func BuildReview(reviewVersion string, uid types.UID, desiredAPIVersion string, objects [][]byte) ([]byte, error) {
	raws := make([]runtime.RawExtension, len(objects))
	for i, o := range objects {
		raws[i] = runtime.RawExtension{Raw: o}
	}
	switch reviewVersion {
	case "v1":
		return json.Marshal(&apiextensionsv1.ConversionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "ConversionReview"},
			Request:  &apiextensionsv1.ConversionRequest{UID: uid, DesiredAPIVersion: desiredAPIVersion, Objects: raws},
		})
	case "v1beta1":
		return json.Marshal(&apiextensionsv1beta1.ConversionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1beta1.SchemeGroupVersion.String(), Kind: "ConversionReview"},
			Request:  &apiextensionsv1beta1.ConversionRequest{UID: uid, DesiredAPIVersion: desiredAPIVersion, Objects: raws},
		})
	}
	return nil, fmt.Errorf("ConversionReview version %q is not supported: use v1 or v1beta1", reviewVersion)
}

// reviewResponse is the part of a ConversionReview response that is checked. It is decoded
// case-sensitively with integers preserved, like the API server's decoder.
type reviewResponse struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Response   *struct {
		UID              types.UID         `json:"uid"`
		ConvertedObjects []json.RawMessage `json:"convertedObjects"`
		Result           metav1.Status     `json:"result"`
	} `json:"response"`
}

// item is one object on its way through the checks.
type item struct {
	index   int // position in the input
	source  string
	version string // its own version (for round trips)
	orig    map[string]any
	raw     []byte
	failed  bool
	// convRaw is the webhook's bytes for this object; reusable says they are what the API
	// server would use (no metadata restored, nothing pruned), so a round trip can send them
	// back as they are instead of encoding the object again.
	convRaw  []byte
	reusable bool
	// original is, for the way back of a round trip, the object as it was first sent.
	original map[string]any
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
}

// Run converts objects to opts.To (and back with opts.RoundTrip) and checks everything. The
// error is for a run that cannot start (unknown version, object of another kind); what goes
// wrong with the webhook is in the report (Unreachable when it could not be reached).
func Run(ctx context.Context, opts Options, objects []Object) (*Report, error) {
	r, err := newRunner(opts, false)
	if err != nil {
		return nil, err
	}
	return r.run(ctx, objects)
}

// newRunner prepares a run. viaServer: the API server calls the webhook (no transport, no
// review version of our own).
func newRunner(opts Options, viaServer bool) (*runner, error) {
	crd := opts.CRD
	if crd == nil {
		return nil, errors.New("no CustomResourceDefinition given")
	}
	r := &runner{opts: opts, crd: crd, group: crd.Spec.Group, kind: crd.Spec.Names.Kind, schemas: map[string]*versionSchema{}, tally: newTally(), newUID: opts.NewUID}
	if r.newUID == nil {
		r.newUID = uuid.NewUUID
	}
	if r.opts.BatchSize <= 0 {
		r.opts.BatchSize = DefaultBatchSize
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

func (r *runner) run(ctx context.Context, objects []Object) (*Report, error) {
	r.report.Objects = len(objects)
	// Group by the objects' own version, keeping the input order within each group.
	groups := map[string][]*item{}
	var order []string
	inputPruned := 0
	for i, o := range objects {
		av, _ := o.Object["apiVersion"].(string)
		kind, _ := o.Object["kind"].(string)
		g, v, _ := strings.Cut(av, "/")
		if g != r.group || !r.hasVersion(v) {
			return nil, fmt.Errorf("%s: apiVersion %q is not a version of %s (have: %s)", o.Source, av, r.crd.Name, r.joinAPIVersions())
		}
		if kind != r.kind {
			return nil, fmt.Errorf("%s: kind %q is not %s's kind %q", o.Source, kind, r.crd.Name, r.kind)
		}
		if v == r.opts.To {
			r.report.Skipped++
			continue
		}
		// What the API server would have stored: pruned and defaulted in the object's version.
		obj := runtime.DeepCopyJSON(o.Object)
		if len(r.schemas[v].pruneObject(obj, true)) > 0 {
			inputPruned++
		}
		r.schemas[v].defaultObject(obj)
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Source, err)
		}
		if _, ok := groups[v]; !ok {
			order = append(order, v)
		}
		groups[v] = append(groups[v], &item{index: i, source: o.Source, version: v, orig: obj, raw: raw})
	}
	if inputPruned > 0 {
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("%d input object(s) had fields their own version's schema does not know: they were pruned before sending, as the API server would on create", inputPruned))
	}
	if r.report.Skipped > 0 {
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("%d object(s) already at %s were not sent (the API server never sends them)", r.report.Skipped, r.opts.To))
	}
	var batches []*batch
	for _, v := range order {
		items := groups[v]
		for start := 0; start < len(items); start += r.opts.BatchSize {
			batches = append(batches, &batch{items: items[start:min(start+r.opts.BatchSize, len(items))], from: v, t1: newTally(), t2: newTally()})
		}
	}
	if err := r.pipeline(ctx, batches); err != nil {
		return nil, err
	}
	var failed []*item
	for _, b := range batches {
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
			case it.failed:
				failed = append(failed, it)
			case unsent[it]:
				r.report.NotSent++
			default:
				r.report.Converted++
			}
		}
	}
	sort.SliceStable(failed, func(i, j int) bool { return failed[i].index < failed[j].index })
	for _, it := range failed {
		r.report.Failed = append(r.report.Failed, FailedObject{Source: it.source, Object: it.orig})
	}
	return r.finish(), nil
}

func (r *runner) joinAPIVersions() string {
	var out []string
	for _, v := range r.versionNames() {
		out = append(out, r.apiVersion(v))
	}
	return strings.Join(out, ", ")
}

// batch is one group of objects on its way there (leg 1) and, for round trips, back (leg 2).
type batch struct {
	items    []*item
	from     string
	x1, x2   *exchange
	out      []map[string]any // leg 1 results, aligned with items
	back     []*item          // leg 2 items
	backOrig []*item          // the original of each leg 2 item
	t1, t2   *tally
	checked1 chan struct{}
}

// exchange is one ConversionReview request and what came back.
type exchange struct {
	items    []*item
	from, to string
	number   int
	uid      types.UID
	resp     *HTTPResponse
	err      error
	buildErr error
}

// pipeline sends the requests one at a time, in order, as the API server does for a list,
// while the responses already received are checked on other goroutines: leg 1 of batch i+1
// goes out while batch i is checked; leg 2 of batch i goes out once its leg 1 is checked.
func (r *runner) pipeline(ctx context.Context, batches []*batch) error {
	sem := make(chan struct{}, 2) // checks in flight besides the requests
	var wg sync.WaitGroup
	check := func(fn func()) {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn()
		}()
	}
	sendLeg2 := func(b *batch) {
		<-b.checked1
		if len(b.back) == 0 || r.stop {
			return
		}
		b.x2 = r.post(ctx, b.back, b.from, r.opts.To)
		check(func() {
			res := r.check(b.x2, b.t2)
			for i, o := range res {
				if o == nil {
					b.backOrig[i].failed = true
					continue
				}
				r.compareRoundTrip(b.t2, b.backOrig[i], o)
			}
		})
	}
	total, done := 0, 0
	for _, b := range batches {
		total += len(b.items)
	}
	progress := func(b *batch) {
		done += len(b.items)
		if r.opts.Progress != nil {
			r.opts.Progress(done, total)
		}
	}
	var prev *batch
	for _, b := range batches {
		if err := ctx.Err(); err != nil {
			wg.Wait()
			return err
		}
		if r.stop {
			break
		}
		b.checked1 = make(chan struct{})
		b.x1 = r.post(ctx, b.items, r.opts.To, b.from)
		check(func() {
			defer close(b.checked1)
			b.out = r.check(b.x1, b.t1)
			if !r.opts.RoundTrip {
				return
			}
			for i, o := range b.out {
				if o == nil {
					continue
				}
				raw := b.items[i].convRaw
				if !b.items[i].reusable {
					var err error
					if raw, err = json.Marshal(o); err != nil {
						b.items[i].failed = true
						continue
					}
				}
				b.back = append(b.back, &item{index: b.items[i].index, source: b.items[i].source, version: r.opts.To, orig: o, raw: raw, original: b.items[i].orig})
				b.backOrig = append(b.backOrig, b.items[i])
			}
		})
		if !r.opts.RoundTrip {
			progress(b)
		} else if prev != nil {
			sendLeg2(prev)
			progress(prev)
		}
		prev = b
	}
	if r.opts.RoundTrip && prev != nil && prev.checked1 != nil {
		sendLeg2(prev)
		progress(prev)
	}
	wg.Wait()
	return ctx.Err()
}

// post sends one ConversionReview (not for strategy None). It runs on the requesting
// goroutine only: requests go one at a time.
func (r *runner) post(ctx context.Context, items []*item, to, from string) *exchange {
	x := &exchange{items: items, from: from, to: to}
	if r.none {
		return x
	}
	x.uid = r.newUID()
	raws := make([][]byte, len(items))
	for i, it := range items {
		raws[i] = it.raw
	}
	body, err := BuildReview(r.review, x.uid, r.apiVersion(to), raws)
	if err != nil {
		x.buildErr = err
		return x
	}
	r.requests++
	x.number = r.requests
	start := time.Now()
	x.resp, x.err = r.opts.Transport.Post(ctx, body)
	if x.err == nil {
		r.tally.latencies = append(r.tally.latencies, time.Since(start))
		return x
	}
	var te *TransportError
	if !errors.As(x.err, &te) || !te.Timeout {
		r.stop = true
		r.report.Unreachable = x.err.Error()
	}
	return x
}

// check runs every check on the response of x into t. The result is aligned with
// x.items: the converted object as the API server would use it (metadata restored, pruned
// in the target schema), or nil where the API server would have failed the conversion.
// Failing items are marked.
func (r *runner) check(x *exchange, t *tally) []map[string]any {
	items, to, from := x.items, x.to, x.from
	dir := from + " -> " + to
	if r.none {
		return r.convertNone(t, items, to, dir)
	}
	out := make([]map[string]any, len(items))
	failAll := func(f Finding) []map[string]any {
		f.Direction = dir
		if f.Object == "" {
			f.Object = batchName(x)
		}
		t.fail(f)
		for _, it := range items {
			it.failed = true
		}
		return out
	}
	if x.buildErr != nil {
		return failAll(Finding{Check: CheckResponseJSON, Detail: "building the request: " + x.buildErr.Error()})
	}
	uid, resp := x.uid, x.resp
	if x.err != nil {
		var te *TransportError
		if errors.As(x.err, &te) && te.Timeout {
			t.pass(CheckConnection)
			return failAll(Finding{Check: CheckTimeout, Detail: x.err.Error()})
		}
		return failAll(Finding{Check: CheckConnection, Detail: x.err.Error()})
	}
	t.pass(CheckConnection)
	t.pass(CheckTimeout)

	if resp.StatusCode != 200 {
		return failAll(Finding{Check: CheckHTTPStatus, Detail: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, snippet(resp.Body))})
	}
	t.pass(CheckHTTPStatus)
	if mt, _, err := mime.ParseMediaType(resp.ContentType); err != nil || mt != "application/json" {
		// client-go still decodes a JSON body under another content type, so the API server
		// accepts it today: a warning.
		t.fail(Finding{Object: batchName(x), Direction: dir, Check: CheckContentType, Severity: SeverityWarning,
			Detail: fmt.Sprintf("Content-Type %q: a ConversionReview response should be application/json (the API server's client falls back to decoding it as JSON)", resp.ContentType)})
	} else {
		t.pass(CheckContentType)
	}
	var rev reviewResponse
	if err := kjson.UnmarshalCaseSensitivePreserveInts(resp.Body, &rev); err != nil {
		return failAll(Finding{Check: CheckResponseJSON, Detail: fmt.Sprintf("malformed response: %v: %s", err, snippet(resp.Body))})
	}
	t.pass(CheckResponseJSON)
	wantAPIVersion := "apiextensions.k8s.io/" + r.review
	switch {
	case r.review == "v1" && (rev.APIVersion != wantAPIVersion || rev.Kind != "ConversionReview"):
		// The API server's explicit check for v1 reviews.
		return failAll(Finding{Check: CheckReviewKind, Detail: fmt.Sprintf("expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got %s, Kind=%s", rev.APIVersion, rev.Kind)})
	case r.review == "v1beta1" && (rev.APIVersion != "" || rev.Kind != "") && (rev.APIVersion != wantAPIVersion || rev.Kind != "ConversionReview"):
		// v1beta1 has no explicit check, but the API server's decoder fails on any other
		// registered-or-not kind (an empty one defaults to the request's).
		return failAll(Finding{Check: CheckReviewKind, Detail: fmt.Sprintf("the API server cannot decode a %s, Kind=%s as the apiextensions.k8s.io/v1beta1 ConversionReview it asked for", rev.APIVersion, rev.Kind)})
	}
	t.pass(CheckReviewKind)
	if rev.Response == nil {
		return failAll(Finding{Check: CheckResponsePresent, Detail: "no response provided (.response is missing)"})
	}
	t.pass(CheckResponsePresent)
	if r.review == "v1" {
		if rev.Response.UID != uid {
			return failAll(Finding{Check: CheckResponseUID, Detail: fmt.Sprintf("expected response.uid=%q, got %q", uid, rev.Response.UID)})
		}
		t.pass(CheckResponseUID)
	}
	if rev.Response.Result.Status != metav1.StatusSuccess {
		msg := rev.Response.Result.Message
		if msg == "" {
			msg = fmt.Sprintf("response.result.status was %q, not \"Success\"", rev.Response.Result.Status)
		} else {
			msg = "the webhook failed the conversion: " + msg
		}
		return failAll(Finding{Check: CheckResultStatus, Detail: msg})
	}
	t.pass(CheckResultStatus)
	conv := rev.Response.ConvertedObjects
	if len(conv) != len(items) {
		return failAll(Finding{Check: CheckObjectCount, Detail: fmt.Sprintf("returned %d objects, expected %d", len(conv), len(items))})
	}
	t.pass(CheckObjectCount)

	// Decode the converted objects and pair each with the original it belongs to: at the
	// same index, or (when the webhook reordered them) the one with the same uid or
	// namespace/name.
	objs := make([]map[string]any, len(conv))
	for i, raw := range conv {
		var m map[string]any
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &m); err != nil || m == nil {
			items[i].failed = true
			t.fail(Finding{Object: items[i].source, Direction: dir, Check: CheckObjectJSON, Detail: fmt.Sprintf("converted object at index %d is not a JSON object: %s", i, snippet(raw))})
			continue
		}
		t.pass(CheckObjectJSON)
		objs[i] = m
	}
	pair := make([]int, len(objs)) // converted index -> original index
	used := make([]bool, len(items))
	for i := range pair {
		pair[i] = -1
		if objs[i] != nil && sameIdentity(items[i].orig, objs[i]) {
			pair[i], used[i] = i, true
		}
	}
	reordered := false
	for i := range pair {
		if pair[i] >= 0 || objs[i] == nil {
			continue
		}
		for j := range items {
			if !used[j] && sameIdentity(items[j].orig, objs[i]) {
				pair[i], used[j], reordered = j, true, true
				break
			}
		}
	}
	for i := range pair { // what is left stays at its index (and fails name/uid checks)
		if pair[i] < 0 && !used[i] {
			pair[i], used[i] = i, true
		}
	}
	if reordered {
		var moved []string
		for i, j := range pair {
			if j >= 0 && j != i {
				moved = append(moved, fmt.Sprintf("%d→%d", j, i))
			}
		}
		t.fail(Finding{Object: batchName(x), Direction: dir, Check: CheckObjectOrder,
			Detail: fmt.Sprintf("converted objects are not in the order they were sent (moved: %s); the API server pairs them by index and fails the conversion", strings.Join(moved, ", "))})
		for i, j := range pair {
			if j >= 0 && j != i {
				items[j].failed = true
			}
		}
	} else {
		t.pass(CheckObjectOrder)
	}
	for i, m := range objs {
		j := pair[i]
		if m == nil || j < 0 {
			continue
		}
		items[j].convRaw = conv[i]
		out[j] = r.checkObject(t, items[j], m, to, dir)
	}
	return out
}

// sameIdentity: converted belongs to orig when their uids match (if orig has one), or else
// their namespace and name.
func sameIdentity(orig, converted map[string]any) bool {
	om, _ := orig["metadata"].(map[string]any)
	cm, _ := converted["metadata"].(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	if ou := str(om, "uid"); ou != "" {
		return ou == str(cm, "uid")
	}
	return str(om, "name") == str(cm, "name") && str(om, "namespace") == str(cm, "namespace")
}

func nestedString(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = mm[p]
	}
	s, _ := cur.(string)
	return s
}

var identityChecks = []struct {
	check string
	path  []string
}{
	{CheckKindUnchanged, []string{"kind"}},
	{CheckNameUnchanged, []string{"metadata", "name"}},
	{CheckNamespaceUnchanged, []string{"metadata", "namespace"}},
	{CheckUIDUnchanged, []string{"metadata", "uid"}},
}

// checkObject runs the per-object checks on one converted object, in the API server's
// order, and returns it as the API server would use it (nil when it would fail).
func (r *runner) checkObject(t *tally, it *item, conv map[string]any, to, dir string) map[string]any {
	fail := func(check, path, detail string) {
		it.failed = true
		t.fail(Finding{Object: it.source, Direction: dir, Check: check, Path: path, Detail: detail})
	}
	ok := true
	want := r.apiVersion(to)
	if got, _ := conv["apiVersion"].(string); got != want {
		fail(CheckAPIVersion, ".apiVersion", fmt.Sprintf("invalid groupVersion (expected %s, received %q)", want, got))
		ok = false
	} else {
		t.pass(CheckAPIVersion)
	}
	for _, c := range identityChecks {
		if e, a := nestedString(it.orig, c.path...), nestedString(conv, c.path...); e != a {
			fail(c.check, "."+strings.Join(c.path, "."), fmt.Sprintf("must be unchanged: %q became %q", e, a))
			ok = false
		} else {
			t.pass(c.check)
		}
	}
	meta, isMap := conv["metadata"].(map[string]any)
	if !isMap {
		if _, found := conv["metadata"]; !found {
			fail(CheckMetadataPresent, ".metadata", "missing metadata in converted object")
		} else {
			fail(CheckMetadataPresent, ".metadata", fmt.Sprintf("invalid metadata of type %T in converted object", conv["metadata"]))
		}
		return nil
	}
	t.pass(CheckMetadataPresent)

	// Metadata other than labels and annotations: the API server restores it from the
	// original, silently.
	origMeta, _ := it.orig["metadata"].(map[string]any)
	var changed []string
	if !metadataEqual(origMeta, meta) { // the common case allocates nothing
		keys := map[string]bool{}
		for k := range origMeta {
			keys[k] = true
		}
		for k := range meta {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			if ownCheck(k) {
				continue
			}
			if !jsonEqual(origMeta[k], meta[k]) {
				changed = append(changed, k)
				t.fail(Finding{Object: it.source, Direction: dir, Check: CheckMetadataUnchanged, Severity: SeverityWarning, Path: ".metadata." + k,
					Detail: fmt.Sprintf("changed %s → %s: the API server discards changes to metadata other than labels and annotations", compact(origMeta[k]), compact(meta[k]))})
			}
		}
	}
	if len(changed) > 0 {
		it.failed = true
	} else {
		t.pass(CheckMetadataUnchanged)
	}

	restored := map[string]any{}
	for k, v := range conv {
		restored[k] = v
	}
	newMeta := runtime.DeepCopyJSONValue(origMeta)
	if newMeta == nil {
		newMeta = map[string]any{}
	}
	nm := newMeta.(map[string]any)
	laOK := true
	for _, fld := range []string{"labels", "annotations"} {
		v, found := meta[fld]
		if !found || v == nil {
			delete(nm, fld)
			continue
		}
		resp, isMap := v.(map[string]any)
		if !isMap {
			fail(CheckLabelsAnnotations, ".metadata."+fld, fmt.Sprintf("invalid metadata.%s of type %T in converted object", fld, v))
			laOK = false
			continue
		}
		orig, _ := origMeta[fld].(map[string]any)
		somethingChanged := len(orig) != len(resp)
		strs := make(map[string]string, len(resp))
		bad := false
		keys := make([]string, 0, len(resp))
		for k := range resp {
			keys = append(keys, k)
		}
		if len(keys) > 1 {
			sort.Strings(keys)
		}
		for _, k := range keys {
			s, isStr := resp[k].(string)
			if !isStr {
				fail(CheckLabelsAnnotations, fmt.Sprintf(".metadata.%s[%s]", fld, k), fmt.Sprintf("metadata.%s[%s] must be a string, but is %T in converted object", fld, k, resp[k]))
				bad = true
				continue
			}
			strs[k] = s
			if orig[k] != any(s) {
				somethingChanged = true
			}
		}
		if bad {
			laOK = false
			continue
		}
		if somethingChanged {
			var errs field.ErrorList
			if fld == "labels" {
				errs = metav1validation.ValidateLabels(strs, field.NewPath("metadata", "labels"))
			} else {
				errs = apivalidation.ValidateAnnotations(strs, field.NewPath("metadata", "annotations"))
			}
			for _, e := range errs {
				fail(CheckLabelsAnnotations, "."+e.Field, e.ErrorBody())
				laOK = false
			}
		}
		nm[fld] = resp
	}
	if !laOK {
		ok = false
	} else {
		t.pass(CheckLabelsAnnotations)
	}
	if !ok {
		return nil
	}
	restored["metadata"] = nm
	obj, pruned := r.checkInTarget(t, it, restored, to, dir)
	it.reusable = len(changed) == 0 && pruned == 0 && !bytes.Contains(it.convRaw, []byte("null"))
	return obj
}

// ownCheck: metadata fields with checks of their own, or that may change.
func ownCheck(k string) bool {
	switch k {
	case "labels", "annotations", "name", "namespace", "uid":
		return true
	}
	return false
}

// metadataEqual compares metadata except the fields ownCheck names.
func metadataEqual(a, b map[string]any) bool {
	for k, v := range a {
		if !ownCheck(k) && !jsonEqual(v, b[k]) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && !ownCheck(k) {
			return false
		}
	}
	return true
}

// checkInTarget prunes obj in the target version's schema (what is pruned is data the API
// server would lose) and validates it there.
func (r *runner) checkInTarget(t *tally, it *item, obj map[string]any, to, dir string) (map[string]any, int) {
	s := r.schemas[to]
	// No null in what the webhook sent: nothing for the null pruning to do.
	pruned := s.pruneObject(obj, it.convRaw == nil || bytes.Contains(it.convRaw, []byte("null")))
	for _, p := range pruned {
		it.failed = true
		t.fail(Finding{Object: it.source, Direction: dir, Check: CheckPruned, Path: p,
			Detail: fmt.Sprintf("not in the %s schema: the API server prunes it (data loss)", to)})
	}
	if len(pruned) == 0 {
		t.pass(CheckPruned)
	}
	if it.original != nil && len(pruned) == 0 && jsonEqual(obj, it.original) {
		// Back from a round trip exactly as it was sent: it is as valid as the input was, and
		// validating it again would say nothing about the conversion.
		return obj, 0
	}
	errs := s.validate(obj)
	for _, e := range errs {
		it.failed = true
		t.fail(Finding{Object: it.source, Direction: dir, Check: CheckTargetSchema, Path: "." + e.Field, Detail: e.ErrorBody()})
	}
	if len(errs) == 0 {
		t.pass(CheckTargetSchema)
	}
	return obj, len(pruned)
}

// convertNone does what the API server does for strategy None: change apiVersion, then
// prune in the target schema.
func (r *runner) convertNone(t *tally, items []*item, to, dir string) []map[string]any {
	out := make([]map[string]any, len(items))
	for i, it := range items {
		obj := runtime.DeepCopyJSON(it.orig)
		obj["apiVersion"] = r.apiVersion(to)
		out[i], _ = r.checkInTarget(t, it, obj, to, dir)
	}
	return out
}

// compareRoundTrip diffs the original with the object that came back from A → V → A.
func (r *runner) compareRoundTrip(t *tally, it *item, back map[string]any) {
	if jsonEqual(it.orig, back) {
		t.pass(CheckRoundTrip)
		return
	}
	diffs := Diff(it.orig, back)
	for _, d := range diffs {
		it.failed = true
		t.fail(Finding{Object: it.source, Direction: it.version + " -> " + r.opts.To + " -> " + it.version, Check: CheckRoundTrip, Path: d.Path, Detail: d.Detail})
	}
	if len(diffs) == 0 {
		t.pass(CheckRoundTrip)
	}
}

// batchName names a request in findings that concern the whole request.
func batchName(x *exchange) string {
	if len(x.items) == 1 {
		return x.items[0].source
	}
	return fmt.Sprintf("request #%d (%d objects)", x.number, len(x.items))
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}

func compact(v any) string {
	if v == nil {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

func jsonEqual(a, b any) bool {
	if an, ok := number(a); ok {
		bn, ok := number(b)
		return ok && an == bn
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k, x := range av {
			y, found := bv[k]
			if !found || !jsonEqual(x, y) {
				return false
			}
		}
		return true
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !jsonEqual(av[i], bv[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
