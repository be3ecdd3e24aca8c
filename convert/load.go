package convert

// load.go: does the webhook meet the API server's budget? ConversionReviews of the sizes the
// API server sends (one object; a namespace's list; the cluster's list), timed one after the
// other as the API server sends them, and judged against the scale targets of CRDs' graduation
// to GA (KEP-95).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// LoadSize is a number of objects per ConversionReview and the time the webhook may take for it.
type LoadSize struct {
	Objects int
	Budget  time.Duration
	// What names the API server request that sends this many objects.
	What string
}

// KEP95Sizes are the conversion budgets of the CRD GA scale targets (KEP-95, "Scale
// Targets for GA"): a webhook answers for one object in 50 ms, for a namespace's list of
// 1,500 objects in 1 s, and for the cluster's list of 10,000 objects in 6 s (objects of up to
// 10 kB).
var KEP95Sizes = []LoadSize{
	{Objects: 1, Budget: 50 * time.Millisecond, What: "one object"},
	{Objects: 1500, Budget: time.Second, What: "a namespace's list"},
	{Objects: 10000, Budget: 6 * time.Second, What: "the cluster's list"},
}

// KEP95ObjectBytes is the object size the KEP-95 budgets are given for (up to 10 kB).
const KEP95ObjectBytes = 10 * 1000

// LoadSizeFor returns the KEP-95 size of n objects.
func LoadSizeFor(n int) (LoadSize, bool) {
	for _, s := range KEP95Sizes {
		if s.Objects == n {
			return s, true
		}
	}
	return LoadSize{}, false
}

// Defaults of a load run.
const (
	DefaultLoadRequests = 100
	DefaultLoadDuration = 60 * time.Second
	// MinLoadRequests are sent for every size even past LoadOptions.MaxDuration.
	MinLoadRequests = 3
	// maxLoadFindings bounds the findings a load report keeps.
	maxLoadFindings = 20
)

// The verdicts of a size.
const (
	VerdictWithin = "within" // p99 within the budget, every answer correct
	VerdictOver   = "over"   // p99 over the budget
	VerdictFailed = "failed" // an answer failed a check (or timed out): the API server would fail those requests
	VerdictNotRun = "not-run"
)

// LoadOptions of a load run.
type LoadOptions struct {
	CRD *apiextensionsv1.CustomResourceDefinition
	// To is the version the objects are converted to.
	To string
	// ReviewVersion as in Options (empty: the API server's choice).
	ReviewVersion string
	// Transport reaches the webhook.
	Transport Transport
	// Sizes to send (nil: KEP95Sizes).
	Sizes []LoadSize
	// Requests is the number of timed requests per size (0: DefaultLoadRequests).
	Requests int
	// MaxDuration bounds the time spent on one size: no request is started after it, once
	// MinLoadRequests are done (0: DefaultLoadDuration).
	MaxDuration time.Duration
	// NewUID makes request UIDs (nil: random UUIDs, like the API server).
	NewUID func() types.UID
	// Progress, when set, is called after each request with the size's index in Sizes, the
	// timed requests done and the number asked for.
	Progress func(size, done, total int)
}

// LoadReport is the result of a load run. Its JSON shape is stable (docs/commands/convert.md).
type LoadReport struct {
	CRD           string `json:"crd"`
	Webhook       string `json:"webhook"`
	ReviewVersion string `json:"reviewVersion"`
	To            string `json:"to"`
	// Objects is how many distinct objects the requests are filled with (cycled, each encoded
	// once); ObjectBytes their average and LargestObjectBytes the largest JSON size.
	Objects            int          `json:"objects"`
	ObjectBytes        int          `json:"objectBytes"`
	LargestObjectBytes int          `json:"largestObjectBytes"`
	Sizes              []LoadResult `json:"sizes"`
	// Checks and Findings are those of the first (untimed) answer of each size, checked in
	// full as the API server checks it, and of the answers' envelopes (status, review kind,
	// uid, result, object count) of every timed request.
	Checks   []CheckCount `json:"checks"`
	Findings []Finding    `json:"findings"`
	Notes    []string     `json:"notes,omitempty"`
	// Unreachable is set when the webhook could not be reached: the run stopped.
	Unreachable      string          `json:"unreachable,omitempty"`
	UnreachableError *TransportError `json:"-"`
}

// LoadResult is one size's measurement and verdict.
type LoadResult struct {
	Objects  int     `json:"objects"`
	What     string  `json:"what"`
	BudgetMs float64 `json:"budgetMs"`
	// RequestBytes is the size of one request's body.
	RequestBytes int `json:"requestBytes"`
	// Requests timed, and those whose answer failed a check or timed out.
	Requests int     `json:"requests"`
	Failed   int     `json:"failed"`
	Latency  Latency `json:"latency"`
	Verdict  string  `json:"verdict"`
}

// Over reports whether any size is over its budget or failed: the webhook does not meet the
// API server's budget.
func (r *LoadReport) Over() bool {
	for _, s := range r.Sizes {
		if s.Verdict == VerdictOver || s.Verdict == VerdictFailed {
			return true
		}
	}
	return false
}

// Load sends, for each size, one untimed request (the connection is opened and its answer
// checked in full) and then opts.Requests timed ones, one at a time, each holding that many
// objects: objects cycled (as the API server would store them: pruned and defaulted in their
// own version), encoded once per run and each request's body once per size (only the uid
// changes). Only the POST and the reading of the answer are timed. Objects at opts.To are
// not sent (the API server never sends them). The error is for a run that cannot start, or
// ctx's when it ends the run.
func Load(ctx context.Context, opts LoadOptions, objects []Object) (*LoadReport, error) {
	r, err := newRunner(Options{CRD: opts.CRD, To: opts.To, ReviewVersion: opts.ReviewVersion, Transport: opts.Transport, NewUID: opts.NewUID}, false)
	if err != nil {
		return nil, err
	}
	if r.none {
		return nil, fmt.Errorf("%s: spec.conversion.strategy is None: there is no webhook to load", opts.CRD.Name)
	}
	var items []*item
	rep := &LoadReport{CRD: opts.CRD.Name, Webhook: r.report.Webhook, ReviewVersion: r.review, To: opts.To, Findings: []Finding{}}
	total := 0
	for _, o := range objects {
		it, err := r.prepare(o)
		if err != nil {
			return nil, err
		}
		if it == nil {
			continue
		}
		items = append(items, it)
		total += len(it.raw)
		rep.LargestObjectBytes = max(rep.LargestObjectBytes, len(it.raw))
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%s: every object is already at %s: nothing to convert (the API server never sends those)", opts.CRD.Name, opts.To)
	}
	rep.Objects = len(items)
	rep.ObjectBytes = total / len(items)
	sizes := opts.Sizes
	if sizes == nil {
		sizes = KEP95Sizes
	}
	requests := opts.Requests
	if requests <= 0 {
		requests = DefaultLoadRequests
	}
	maxDur := opts.MaxDuration
	if maxDur <= 0 {
		maxDur = DefaultLoadDuration
	}
	for _, s := range sizes {
		rep.Sizes = append(rep.Sizes, LoadResult{Objects: s.Objects, What: s.What, BudgetMs: ms(s.Budget), Verdict: VerdictNotRun})
	}
	t := newTally()
	seen := map[string]bool{}
	for i, s := range sizes {
		if rep.Unreachable != "" {
			break
		}
		if err := r.loadSize(ctx, &rep.Sizes[i], s, items, requests, maxDur, t, seen, rep, func(done int) {
			if opts.Progress != nil {
				opts.Progress(i, done, requests)
			}
		}); err != nil {
			return nil, err
		}
	}
	rep.Checks = t.checks()
	rep.Findings = append(rep.Findings, t.findings...)
	if len(rep.Findings) > maxLoadFindings {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d finding(s), the first %d listed", len(rep.Findings), maxLoadFindings))
		rep.Findings = rep.Findings[:maxLoadFindings]
	}
	if rep.Objects < sizes[len(sizes)-1].Objects {
		rep.Notes = append(rep.Notes, fmt.Sprintf("each request repeats the %d object(s) given up to its size", rep.Objects))
	}
	if rep.LargestObjectBytes > KEP95ObjectBytes {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the largest object is %d bytes: the budgets are for objects of up to 10 kB", rep.LargestObjectBytes))
	}
	if requests < 100 {
		rep.Notes = append(rep.Notes, "p99 of fewer than 100 requests is their slowest")
	}
	return rep, nil
}

// loadSize measures one size into res.
func (r *runner) loadSize(ctx context.Context, res *LoadResult, s LoadSize, pool []*item, requests int, maxDur time.Duration, t *tally, seen map[string]bool, rep *LoadReport, progress func(int)) error {
	batch := make([]*item, s.Objects)
	raws := make([][]byte, s.Objects)
	for i := range batch {
		batch[i] = pool[i%len(pool)]
		raws[i] = batch[i].raw
	}
	from := batch[0].version
	// One body per size: a placeholder uid, overwritten in place for each request (a uid is
	// always 36 characters).
	placeholder := r.newUID()
	body, err := BuildReview(r.review, placeholder, r.apiVersion(r.opts.To), raws)
	if err != nil {
		return err
	}
	at := bytes.Index(body, []byte(placeholder))
	if at < 0 || len(placeholder) != 36 {
		return errors.New("building the request: the uid is not where it was put")
	}
	res.RequestBytes = len(body)
	send := func() (*exchange, time.Duration) {
		x := &exchange{items: batch, from: from, to: r.opts.To, uid: r.newUID()}
		if len(x.uid) != 36 {
			x.uid = types.UID(uuid.NewUUID())
		}
		copy(body[at:at+36], x.uid)
		r.requests++
		x.number = r.requests
		start := time.Now()
		x.resp, x.err = r.opts.Transport.Post(ctx, body)
		return x, time.Since(start)
	}
	unreachable := func(x *exchange) bool {
		var te *TransportError
		if x.err == nil || (errors.As(x.err, &te) && te.Timeout) {
			return false
		}
		if ctx.Err() != nil {
			return true
		}
		rep.Unreachable = x.err.Error()
		rep.UnreachableError = te
		return true
	}

	// The first request opens the connection (the API server keeps its connections to a
	// webhook open) and its answer is checked in full: untimed.
	x, _ := send()
	if err := ctx.Err(); err != nil {
		return err
	}
	if unreachable(x) {
		return nil
	}
	for _, it := range batch {
		it.failed, it.wholeFailed = false, false
	}
	full := newTally()
	r.check(x, full)
	x.resp = nil
	fullFailed := false
	for _, c := range full.counts {
		fullFailed = fullFailed || c.Failed > 0
	}
	full.findings = dedupeFindings(full.findings, seen)
	t.merge(full)
	// The full check's garbage is collected now, not by a collector running beside the timed
	// requests (on a machine the webhook shares, it would slow the webhook).
	runtime.GC()

	var latencies []time.Duration
	began := time.Now()
	for len(latencies) < requests {
		if len(latencies) >= MinLoadRequests && time.Since(began) > maxDur {
			break
		}
		x, d := send()
		if err := ctx.Err(); err != nil {
			return err
		}
		if unreachable(x) {
			break
		}
		latencies = append(latencies, d)
		if r.checkEnvelope(x, t) != nil {
			res.Failed++
		}
		x.resp = nil
		progress(len(latencies))
	}
	res.Requests = len(latencies)
	if fullFailed {
		// The first answer failed a check the API server makes: it fails such requests.
		res.Failed++
	}
	if len(latencies) == 0 {
		return nil
	}
	res.Latency = latencySummary(latencies)
	switch {
	case res.Failed > 0:
		res.Verdict = VerdictFailed
	case res.Latency.P99 > res.BudgetMs:
		res.Verdict = VerdictOver
	default:
		res.Verdict = VerdictWithin
	}
	if len(latencies) < requests {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d object(s): %d of %d request(s) sent in the %s allowed per size", s.Objects, len(latencies), requests, maxDur))
	}
	return nil
}

// checkEnvelope checks the answer as a whole (what the API server checks before it looks at
// the objects: transport, status, review kind, response, uid, result, object count) and
// records a failure in t. It returns the finding, nil when the envelope is right.
func (r *runner) checkEnvelope(x *exchange, t *tally) *Finding {
	rev, whole := r.checkRequest(x, t)
	if whole == nil && len(rev.Response.ConvertedObjects) != len(x.items) {
		whole = &Finding{Check: CheckObjectCount, Detail: fmt.Sprintf("returned %d objects, expected %d", len(rev.Response.ConvertedObjects), len(x.items))}
	}
	if whole == nil {
		t.pass(CheckObjectCount)
		return nil
	}
	whole.Direction = x.from + " -> " + x.to
	whole.Object = fmt.Sprintf("request %d (%d objects)", x.number, len(x.items))
	t.fail(*whole)
	return whole
}

// dedupeFindings drops the findings already seen: the requests of every size repeat the same
// objects, whose answers fail the same way.
func dedupeFindings(fs []Finding, seen map[string]bool) []Finding {
	var out []Finding
	for _, f := range fs {
		key := f.Object + "\x00" + f.Direction + "\x00" + f.Check + "\x00" + f.Path + "\x00" + f.Detail
		if !seen[key] {
			seen[key] = true
			out = append(out, f)
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
