package webhookcheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/convert"
)

// RoundTripOptions say which objects go through which webhook, and to which versions.
type RoundTripOptions struct {
	// CRD is the CRD whose conversion is judged: its webhook (Transport reaches it) and its
	// versions' schemas (objects are pruned and defaulted in their own version before they are
	// sent, and converted objects pruned and validated in the target, as the API server does).
	CRD       *apiextensionsv1.CustomResourceDefinition
	Transport convert.Transport
	// List lists the stored objects at a version, a page at a time (convert.NewClusterSource).
	List func(version string) convert.Source
	// Pairs are the round trips: the objects listed at From, converted to To and back.
	Pairs []Pair
	// BatchSize is the number of objects per ConversionReview (0: convert.DefaultBatchSize,
	// a list page, as the API server converts it).
	BatchSize int
	// MaxListed bounds the objects named per kind of problem (0: 100); counts are complete.
	MaxListed int
	// Progress, when set, is called after each batch with the object round trips done.
	Progress func(done int64)
}

// Pair is the objects stored at From, round-tripped From → To → From.
type Pair struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Objects sent, and Converted: there and back with no failed check (warnings allowed);
	// Lost: those that lost fields.
	Objects   int `json:"objects"`
	Converted int `json:"converted"`
	Lost      int `json:"lost,omitempty"`
}

// ObjectError is an object whose conversion the API server would fail (or could not make):
// the first failed check, with the webhook's answer.
type ObjectError struct {
	Object    string `json:"object"`
	Direction string `json:"direction"`
	Check     string `json:"check"`
	Detail    string `json:"detail"`
}

func (e ObjectError) String() string {
	return fmt.Sprintf("%s (%s, %s): %s", e.Object, e.Direction, e.Check, e.Detail)
}

// ObjectLoss is an object whose round trip loses fields (the one loss rule:
// convert.Difference.Loss): the paths, and the version the data is held at.
type ObjectLoss struct {
	Object string `json:"object"`
	HeldAt string `json:"heldAt"`
	// To is the version the round trip went to.
	To        string   `json:"to"`
	Direction string   `json:"direction"`
	Fields    []string `json:"fields"`
}

// Result is what the round trips found.
type Result struct {
	Webhook string `json:"webhook"`
	Pairs   []Pair `json:"pairs"`
	// Objects is the number of stored objects listed (each once, whatever the number of
	// versions it went to).
	Objects int64 `json:"objects"`
	// Unreachable: the webhook could not be reached (the run stopped there; NotSent objects
	// were not sent); Hint says what to do.
	Unreachable string        `json:"unreachable,omitempty"`
	Hint        convert.Hint  `json:"hint,omitempty"`
	NotSent     int64         `json:"notSent,omitempty"`
	FailedCount int64         `json:"failedCount"`
	Failed      []ObjectError `json:"failed"`
	LossCount   int64         `json:"lossCount"`
	Losses      []ObjectLoss  `json:"losses"`
	// WarningCount counts what the API server does not fail a conversion on (a Content-Type
	// other than JSON, metadata it restores, an object invalid in the target schema);
	// Warnings lists the first of them.
	WarningCount int64         `json:"warningCount,omitempty"`
	Warnings     []ObjectError `json:"warnings,omitempty"`
	// AddedCount is the number of objects whose round trip adds or normalises fields: no loss.
	AddedCount int64                `json:"addedCount,omitempty"`
	Checks     []convert.CheckCount `json:"checks"`
	Requests   int                  `json:"requests"`
	// SlowestMs is the longest a request took, in milliseconds.
	SlowestMs float64 `json:"slowestMs"`
	// Seconds is the time the round trips took; PerSecond the object round trips (sent there
	// and back, whatever the checks found) per second.
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"perSecond"`
}

// RoundTrip sends every object listed at each pair's From version through the webhook to its
// To version and back, a page at a time, with convert's checks (the API server's, then the
// diff of the round trip). It stops at the first pair that finds the webhook unreachable. The
// error is for a run that cannot complete (a list fails, ctx ends).
func RoundTrip(ctx context.Context, o RoundTripOptions) (*Result, error) {
	if o.MaxListed <= 0 {
		o.MaxListed = 100
	}
	res := &Result{Webhook: o.Transport.Describe(), Pairs: []Pair{}, Failed: []ObjectError{}, Losses: []ObjectLoss{}}
	start := time.Now()
	failed, lost := map[string]bool{}, map[string]bool{}
	counted := map[string]bool{}
	checks := map[string]*convert.CheckCount{}
	var base int64
	for i, p := range o.Pairs {
		opts := convert.Options{CRD: o.CRD, To: p.To, RoundTrip: true, Transport: o.Transport, BatchSize: o.BatchSize, MaxAdded: 1}
		if o.Progress != nil {
			opts.Progress = func(done, _ int) { o.Progress(base + int64(done)) }
		}
		rep, err := convert.RunSource(ctx, opts, o.List(p.From))
		if err != nil {
			return res, err
		}
		base += int64(rep.Objects)
		p.Objects, p.Converted = rep.Objects, rep.Converted
		res.Pairs = append(res.Pairs, p)
		res.Requests += rep.Requests
		res.SlowestMs = max(res.SlowestMs, rep.Latency.Max)
		if !counted[p.From] {
			counted[p.From] = true
			res.Objects += int64(rep.Objects)
		}
		res.AddedCount += int64(rep.AddedObjects)
		for _, c := range rep.Checks {
			mine := checks[c.Name]
			if mine == nil {
				mine = &convert.CheckCount{Name: c.Name}
				checks[c.Name] = mine
			}
			mine.Passed += c.Passed
			mine.Failed += c.Failed
			mine.Warnings += c.Warnings
		}
		p.Lost = res.collect(rep, p, failed, lost, o.MaxListed)
		res.Pairs[len(res.Pairs)-1] = p
		if rep.Unreachable != "" {
			res.Unreachable = rep.Unreachable
			if rep.UnreachableError != nil {
				res.Hint = rep.UnreachableError.Hint
			}
			res.NotSent += int64(rep.NotSent)
			for _, q := range o.Pairs[i+1:] {
				res.Pairs = append(res.Pairs, Pair{From: q.From, To: q.To})
			}
			break
		}
	}
	for _, name := range convert.AllChecks {
		if c := checks[name]; c != nil {
			res.Checks = append(res.Checks, *c)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	if res.Seconds > 0 {
		var n int
		for _, p := range res.Pairs {
			n += p.Objects
		}
		res.PerSecond = float64(n-int(res.NotSent)) / res.Seconds
	}
	return res, nil
}

// collect sorts one pair's findings into failures, losses and warnings, each object once per
// kind. An object that failed only because its request failed as a whole (wrong uid, HTTP
// error, timeout) is named with that request's failure. It returns the objects of the pair
// that lost fields.
func (res *Result) collect(rep *convert.Report, p Pair, failed, lost map[string]bool, limit int) int {
	own := map[string]bool{}
	var whole *convert.Finding
	lossAt := map[string]int{}
	pairLost := 0
	for i := range rep.Findings {
		f := &rep.Findings[i]
		own[f.Object] = true
		switch {
		case f.Check == convert.CheckRoundTrip || f.Check == convert.CheckPruned:
			key := p.From + "\x00" + f.Object
			if j, ok := lossAt[key]; ok {
				if j >= 0 && !slices.Contains(res.Losses[j].Fields, f.Path) {
					res.Losses[j].Fields = append(res.Losses[j].Fields, f.Path)
				}
				continue
			}
			lossAt[key] = -1
			pairLost++
			if !lost[key] {
				lost[key] = true
				res.LossCount++
			}
			if len(res.Losses) < limit {
				lossAt[key] = len(res.Losses)
				res.Losses = append(res.Losses, ObjectLoss{Object: f.Object, HeldAt: p.From, To: p.To, Direction: p.From + " -> " + p.To + " -> " + p.From, Fields: []string{f.Path}})
			}
		case f.Severity == convert.SeverityError:
			if strings.HasPrefix(f.Object, "request #") {
				if whole == nil {
					whole = f
				}
				continue
			}
			res.fail(ObjectError{Object: f.Object, Direction: f.Direction, Check: f.Check, Detail: detail(f)}, failed, limit)
		default:
			res.WarningCount++
			if len(res.Warnings) < limit {
				res.Warnings = append(res.Warnings, ObjectError{Object: f.Object, Direction: f.Direction, Check: f.Check, Detail: detail(f)})
			}
		}
	}
	// Objects a bisection of a failed request blames (each fails a request on its own, or with
	// the smallest group found).
	blamed := map[string]*convert.Bisection{}
	for i := range rep.Bisections {
		for _, o := range rep.Bisections[i].Objects {
			blamed[o] = &rep.Bisections[i]
		}
	}
	for _, fo := range rep.Failed {
		if own[fo.Source] || whole == nil {
			continue
		}
		if b := blamed[fo.Source]; b != nil {
			res.fail(ObjectError{Object: fo.Source, Direction: b.Direction, Check: b.Check, Detail: "blamed by a bisection of its request: " + b.Detail}, failed, limit)
			continue
		}
		res.fail(ObjectError{Object: fo.Source, Direction: whole.Direction, Check: whole.Check, Detail: "its request failed as a whole: " + whole.Detail}, failed, limit)
	}
	return pairLost
}

func (res *Result) fail(e ObjectError, seen map[string]bool, limit int) {
	if seen[e.Object] {
		return
	}
	seen[e.Object] = true
	res.FailedCount++
	if len(res.Failed) < limit {
		res.Failed = append(res.Failed, e)
	}
}

func detail(f *convert.Finding) string {
	if f.Path != "" {
		return f.Path + ": " + f.Detail
	}
	return f.Detail
}

// Down reports whether the run found the webhook unreachable before it converted anything.
func (res *Result) Down() bool {
	if res.Unreachable == "" {
		return false
	}
	for _, p := range res.Pairs {
		if p.Converted > 0 {
			return false
		}
	}
	return true
}

// Summary says in a line what the round trips found.
func (res *Result) Summary() string {
	var parts []string
	switch {
	case res.Unreachable != "":
		parts = append(parts, "unreachable: "+res.Unreachable)
	case res.FailedCount+res.LossCount == 0:
		parts = append(parts, fmt.Sprintf("%d objects round-tripped, every check passed", res.Objects))
	}
	if res.FailedCount > 0 {
		parts = append(parts, fmt.Sprintf("%d objects fail the API server's checks (first: %s)", res.FailedCount, res.Failed[0]))
	}
	if res.LossCount > 0 {
		parts = append(parts, fmt.Sprintf("%d objects lose fields (first: %s: %s)", res.LossCount, res.Losses[0].Object, strings.Join(res.Losses[0].Fields, ", ")))
	}
	return strings.Join(parts, "; ")
}

// IsNoWay reports whether err is ErrNoWay.
func IsNoWay(err error) bool { return errors.Is(err, ErrNoWay) }
