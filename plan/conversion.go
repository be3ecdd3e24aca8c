package plan

// conversion.go: the conversion the new CRD relies on, judged for every CRD whose stored
// objects the release makes readable or writable at another version than the one they are
// stored at: its webhook's configuration and Service (webhookcheck), then a ConversionReview
// round trip of every stored object through it, checked as the API server checks a response
// and judged by the one loss rule.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// ConversionOptions say how the conversion a new CRD relies on is judged.
type ConversionOptions struct {
	// Off: not judged (a path's later hops, planned offline: the path asks each hop's
	// webhook itself, PathOptions.Probe).
	Off bool
	// Dynamic lists the live objects; Kube reads Services and EndpointSlices and reaches the
	// API server's service proxy. Both nil: offline: the conversion is not asked, and where it
	// is needed the plan cannot tell (unknown).
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
	// Target is asked instead of the webhook the new CRD names: the release's webhook running
	// elsewhere (a local binary, a port-forward, a sandbox namespace).
	Target *webhookcheck.Target
	// Sample bounds the objects round-tripped per stored version (0: every one).
	Sample int64
	// Timeout bounds each ConversionReview (0: 30 s, the API server's).
	Timeout time.Duration
	// ChunkSize is the page size of the lists and the objects per ConversionReview (0: 500).
	ChunkSize int64
	// Progress counts the object round trips done (nil: not counted); Start, when set, is
	// called before a CRD's round trips with the number to do, and the function it returns
	// when they are done.
	Progress *atomic.Int64
	Start    func(crd string, total int64) func()
}

// ConversionCheck is what the conversion the new CRD relies on does to the stored objects
// (Item.ConversionCheck): why it is needed, its webhook's state, and the round trips.
type ConversionCheck struct {
	// Needed says which stored objects the release makes read or written at which other
	// versions, one sentence each.
	Needed []string `json:"needed"`
	// Pairs are the versions objects are stored at and the versions they go to.
	Pairs []webhookcheck.Pair `json:"pairs"`
	// Strategy is the new CRD's conversion strategy (Webhook or None); Storage its storage
	// version (what a rewrite stores at).
	Strategy string `json:"strategy"`
	Storage  string `json:"storage"`
	// State is webhookcheck's (answers, fails, down, unreachable, not-asked), or
	// "dropped" (the new CRD converts with None what the live CRD's webhook converts, and
	// what None makes of the objects differs) or "none" (None keeps what the webhook made).
	State string `json:"state"`
	// Reason says the state in a sentence, with the first object and error where there is one.
	Reason string `json:"reason,omitempty"`
	// Webhook names the new CRD's webhook; Target the one asked instead (--webhook);
	// Reached how it was reached and what TLS verification was made.
	Webhook  string                     `json:"webhook,omitempty"`
	Target   string                     `json:"target,omitempty"`
	Reached  string                     `json:"reached,omitempty"`
	Problems []webhookcheck.Problem     `json:"problems"`
	Service  *webhookcheck.ServiceState `json:"service,omitempty"`
	// NotRunning: the webhook is not running (no Service, no port, no ready endpoint, nothing
	// listening): the runbook's deploy-webhook step.
	NotRunning bool `json:"notRunning,omitempty"`
	// RoundTrip is what the round trips found (nil when none was made).
	RoundTrip *webhookcheck.Result `json:"roundTrip,omitempty"`
	// Sample is the bound given (0: every stored object); Sampled: it cut the round trips.
	Sample  int64 `json:"sample,omitempty"`
	Sampled bool  `json:"sampled,omitempty"`
	// Dropped is the live CRD's webhook the new CRD no longer converts through ("" otherwise);
	// Differ compares, per stored object, what it makes of the object with what None makes of
	// it (Losses: the objects read differently, and where).
	Dropped string               `json:"dropped,omitempty"`
	Differ  *webhookcheck.Result `json:"differ,omitempty"`
	// Release is what of the webhook the release's files carry (its workload, Service,
	// certificate, cainjector annotation); nil when they carry none of it.
	Release *ReleaseWebhook `json:"release,omitempty"`
}

// StorageLosses are the round trips' losses towards the new storage version (the objects, and
// the first of them): what a rewrite there stores without. A loss in a round trip to another
// version is lost only by a client that writes back what it read there (a warning of the check).
func (c *ConversionCheck) StorageLosses() (int64, []webhookcheck.ObjectLoss) {
	rt := c.RoundTrip
	if rt == nil {
		return 0, nil
	}
	var n int64
	for _, p := range rt.Pairs {
		if p.To == c.Storage {
			n += int64(p.Lost)
		}
	}
	var out []webhookcheck.ObjectLoss
	for _, l := range rt.Losses {
		if l.To == c.Storage {
			out = append(out, l)
		}
	}
	return n, out
}

// Conversion states of plan's own (webhookcheck has the others).
const (
	ConversionDropped = "dropped"
	ConversionNone    = "none"
)

// Breaks reports whether the conversion, applied as it is, fails reads and writes of the
// stored objects (or silently converts them to something else): the conversion-webhook
// finding.
func (c *ConversionCheck) Breaks() bool {
	if c == nil {
		return false
	}
	switch c.State {
	case webhookcheck.StateFails, webhookcheck.StateDown, webhookcheck.StateUnreachable, ConversionDropped:
		return true
	}
	return false
}

// conversionPairs are the round trips the new CRD's conversion must make for the stored
// objects, when the release changes where they are read or written: from each version they
// are stored at (the live status.storedVersions and storage version, served by the live CRD,
// kept by the new one) to the new storage version (the migration's rewrite and every write
// store there), the new preferred version (kubectl get, the garbage collector and the
// namespace controller read there), each version the release starts serving, and every
// served version when the stored one is no longer served or the conversion itself changes.
// unlisted are the stored versions the live CRD does not serve (not readable as stored).
// Each pair comes with why it is needed.
func conversionPairs(live, next *apiextensionsv1.CustomResourceDefinition) (pairs []neededPair, unlisted []string) {
	nextStorage, nextPreferred := crdinfo.StorageVersion(next), crdinfo.PreferredVersion(next)
	changed := len(conversionChanges(live, next)) > 0
	var added []string
	for _, v := range crdinfo.ServedVersions(next) {
		if !crdinfo.IsServed(live, v) {
			added = append(added, v)
		}
	}
	for _, s := range storedVersionsOf(live) {
		if !crdinfo.Has(next, s) {
			continue // removed: the apply is rejected until it is retired (apply-rejected)
		}
		if !crdinfo.IsServed(live, s) {
			unlisted = append(unlisted, s)
			continue
		}
		why := map[string]string{}
		add := func(v, because string) {
			if v != "" && v != s && why[v] == "" {
				why[v] = fmt.Sprintf("objects stored at %s are %s at %s (%s)", s, map[bool]string{true: "written", false: "read"}[v == nextStorage], v, because)
			}
		}
		add(nextStorage, "the new storage version: the migration's rewrite and every write store them there")
		if nextPreferred != crdinfo.PreferredVersion(live) {
			add(nextPreferred, "the new preferred version: kubectl get, the garbage collector and the namespace controller read there")
		}
		for _, v := range added {
			add(v, "a version the release starts serving")
		}
		if !crdinfo.IsServed(next, s) || changed {
			because := "the new CRD no longer serves " + s
			if changed {
				because = "the conversion changes: " + strings.Join(conversionChanges(live, next), "; ")
			}
			for _, v := range crdinfo.ServedVersions(next) {
				add(v, because)
			}
		}
		for _, v := range crdinfo.VersionNames(next) {
			if why[v] != "" {
				pairs = append(pairs, neededPair{Pair: webhookcheck.Pair{From: s, To: v}, why: why[v]})
			}
		}
	}
	return pairs, unlisted
}

// neededPair is a round trip the conversion must make, and why.
type neededPair struct {
	webhookcheck.Pair
	why string
}

// split is the pairs and the reasons, in order.
func split(ps []neededPair) (pairs []webhookcheck.Pair, why []string) {
	for _, p := range ps {
		pairs, why = append(pairs, p.Pair), append(why, p.why)
	}
	return pairs, why
}

// judgeConversion judges the conversion next relies on for live's stored objects (total: their
// number, -1 when unknown): nil when the release changes nothing that needs a conversion.
func judgeConversion(ctx context.Context, live, next *apiextensionsv1.CustomResourceDefinition, o ConversionOptions, total int64) (*ConversionCheck, error) {
	if live == nil || o.Off {
		return nil, nil
	}
	needed, unlisted := conversionPairs(live, next)
	liveHook, nextHook := webhookcheck.IsWebhook(live), webhookcheck.IsWebhook(next)
	if !nextHook {
		// Dropped: only where the live webhook converts today (to a version the live CRD
		// serves); reads at a version the release adds are the release's own None, which the
		// objects' evaluation judges.
		needed = slices.DeleteFunc(needed, func(p neededPair) bool { return !crdinfo.IsServed(live, p.To) })
	}
	if len(needed) == 0 || !liveHook && !nextHook {
		return nil, nil
	}
	pairs, why := split(needed)
	c := &ConversionCheck{Needed: why, Pairs: pairs, Strategy: string(strategyOf(next)), Storage: crdinfo.StorageVersion(next), Problems: []webhookcheck.Problem{}, Sample: o.Sample}
	if len(unlisted) > 0 {
		// The API server converts objects from the version they are stored at whether or not
		// it is served; they can be listed only at a served one, so the round trips below
		// start there: the conversion from the unserved version itself is not checked.
		c.Problems = append(c.Problems, webhookcheck.Problem{Severity: webhookcheck.SeverityWarning,
			Message: fmt.Sprintf("status.storedVersions lists %s, which the live CRD does not serve: objects still stored there are read only through a conversion from it, which this check cannot ask for itself (not checked); kubectl crdver migrate %s rewrites them at the storage version first", strings.Join(unlisted, ", "), live.Name)})
	}
	if !nextHook {
		return c, judgeDropped(ctx, live, next, o, c)
	}
	wo := webhookcheck.Options{Kube: o.Kube, Reach: webhookcheck.Reach{Target: o.Target, Timeout: o.Timeout}}
	wo.Reach.CABundle, wo.Reach.CANote = webhookcheck.CABundleFor(next, live)
	if o.Dynamic != nil && total != 0 {
		chunk := o.ChunkSize
		if chunk <= 0 {
			chunk = convert.DefaultPageSize
		}
		wo.RoundTrip = webhookcheck.RoundTripOptions{Pairs: pairs, BatchSize: int(chunk),
			List: func(v string) convert.Source {
				return convert.NewClusterSource(o.Dynamic, live, v, convert.Selection{AllNamespaces: true, Limit: o.Sample, PageSize: chunk})
			}}
		if o.Progress != nil {
			wo.RoundTrip.Progress = func(done int64) { o.Progress.Store(done) }
		}
	}
	stop := func() {}
	if o.Start != nil && wo.RoundTrip.Pairs != nil {
		n := total
		if n > 0 {
			if o.Sample > 0 {
				n = min(n, o.Sample)
			}
			n *= int64(len(pairs))
		}
		stop = o.Start(next.Name, n)
	}
	rep, err := webhookcheck.Check(ctx, next, wo)
	stop()
	if err != nil {
		return c, fmt.Errorf("%s: judging its conversion webhook: %w", next.Name, err)
	}
	c.Webhook, c.Target, c.Reached, c.Service, c.RoundTrip = rep.Webhook, rep.Target, rep.Reached, rep.Service, rep.RoundTrip
	c.Problems = append(append([]webhookcheck.Problem{}, rep.Problems...), c.Problems...)
	if o.Target == nil && liveHook && conversionText(live) == conversionText(next) {
		c.Problems = append(c.Problems, webhookcheck.Problem{Severity: webhookcheck.SeverityInfo,
			Message: fmt.Sprintf("the live CRD converts through the same %s: what answers there now is the webhook running in the cluster (the installed release's, unless the new one is deployed); to judge the new release's webhook before it is deployed, run it elsewhere and ask it instead (kubectl crdver plan --webhook URL)", strings.TrimPrefix(c.Webhook, "webhook "))})
	}
	c.State = rep.State
	switch {
	case total == 0:
		c.State, c.Reason = webhookcheck.StateAnswers, "no stored objects: nothing to convert now"
		if rep.State != webhookcheck.StateAnswers && rep.Reason() != "" {
			c.Reason += " (" + rep.Reason() + ")"
		}
		return c, nil
	case o.Dynamic == nil:
		c.State, c.Reason = webhookcheck.StateNotAsked, "not asked: the plan is offline (plan against the cluster)"
		return c, nil
	}
	c.NotRunning = rep.State == webhookcheck.StateDown && rep.NotRunning
	c.Problems = append(c.Problems, readLosses(c)...)
	if rt := c.RoundTrip; rt != nil && o.Sample > 0 {
		c.Sampled = total < 0 || rt.Objects < total
	}
	if c.Reason == "" {
		c.Reason = conversionReason(c, rep)
	}
	return c, nil
}

// readLosses warns of the round trips' losses towards versions other than the new storage
// version: no step of the release writes there, but a client that writes back what it read
// there drops the fields.
func readLosses(c *ConversionCheck) []webhookcheck.Problem {
	if c.RoundTrip == nil {
		return nil
	}
	var out []webhookcheck.Problem
	for _, p := range c.RoundTrip.Pairs {
		if p.Lost == 0 || p.To == c.Storage {
			continue
		}
		var first string
		for _, l := range c.RoundTrip.Losses {
			if l.To == p.To && l.HeldAt == p.From {
				first = fmt.Sprintf(" (first: %s: %s)", l.Object, strings.Join(l.Fields, ", "))
				break
			}
		}
		out = append(out, webhookcheck.Problem{Severity: webhookcheck.SeverityWarning,
			Message: fmt.Sprintf("%s stored at %s lose fields in a round trip to %s%s: no step of the release writes at %s, but a client that writes back what it read there drops them", objects(p.Lost), p.From, p.To, first, p.To)})
	}
	return out
}

// conversionReason is the check's state in a sentence.
func conversionReason(c *ConversionCheck, rep *webhookcheck.Report) string {
	hook := c.Webhook
	if c.Target != "" {
		hook = c.Target + " (asked instead of " + c.Webhook + ")"
	}
	rt := c.RoundTrip
	switch c.State {
	case webhookcheck.StateDown:
		if c.NotRunning {
			return fmt.Sprintf("the conversion webhook the new CRD relies on (%s) is not running: %s", hook, strings.TrimPrefix(rep.Reason(), "webhook is down: "))
		}
		return fmt.Sprintf("the new CRD's conversion webhook configuration cannot work: %s", rep.Reason())
	case webhookcheck.StateUnreachable:
		return fmt.Sprintf("the conversion webhook the new CRD relies on (%s) is not reachable: %s", hook, rep.Reason())
	case webhookcheck.StateNotAsked:
		return fmt.Sprintf("the conversion webhook the new CRD relies on (%s) could not be asked: %s", hook, rep.Reason())
	case webhookcheck.StateFails:
		return fmt.Sprintf("the conversion webhook the new CRD relies on (%s) fails the API server's checks on %s of %d (first: %s)", hook, objects(int(rt.FailedCount)), rt.Objects, rt.Failed[0])
	}
	if rt == nil {
		return ""
	}
	return fmt.Sprintf("through %s: %s", hook, rt.Summary())
}

// settleWebhookNotes: where every stored object went through the webhook (the check answers,
// no sample), an object's note that reading it at the read version "needs the conversion
// webhook" is answered by the check: it is dropped, and a finding left empty with it.
func settleWebhookNotes(it *Item) {
	c := it.ConversionCheck
	if c == nil || c.RoundTrip == nil || c.State != webhookcheck.StateAnswers || c.Sampled {
		return
	}
	suffix := "converting it to " + it.Objects.ReadVersion + " needs the conversion webhook"
	kept := it.Objects.Findings[:0]
	for _, f := range it.Objects.Findings {
		f.Notes = slices.DeleteFunc(f.Notes, func(n string) bool { return strings.HasSuffix(n, suffix) })
		if len(f.Notes) == 0 {
			f.Notes = nil
		}
		if !f.empty() {
			kept = append(kept, f)
		}
	}
	it.Objects.Findings = kept
}

// conversionReasons adds the check's findings to judge's reasons (decision table): a
// conversion that breaks reads is conversion-webhook, what its round trips lose is data-loss,
// a webhook that could not be asked or was asked about a sample is unknown.
func conversionReasons(it *Item, add func(Kind, string)) {
	c := it.ConversionCheck
	if c == nil {
		return
	}
	switch {
	case c.Breaks():
		add(KindConversionWebhook, c.Reason+"; "+strings.Join(c.Needed, "; "))
	case c.State == webhookcheck.StateNotAsked:
		add(KindUnknown, c.Reason+": "+strings.Join(c.Needed, "; ")+", and what it makes of them is not known")
	}
	if n, ls := c.StorageLosses(); n > 0 {
		var fields, who []string
		for _, l := range ls {
			fields = union(fields, l.Fields)
			who = append(who, l.Object)
		}
		add(KindDataLoss, fmt.Sprintf("%s %s fields through the conversion webhook's round trip to the new storage version %s (%s), and from etcd when rewritten there: %s (%s)",
			objects(int(n)), agree(int(n), "loses", "lose"), c.Storage, c.Reached, strings.Join(fields, ", "), names(who)))
	}
	if c.Sampled && !c.Breaks() {
		add(KindUnknown, fmt.Sprintf("only %d of %s stored objects were round-tripped through the conversion webhook (the sample): what it makes of the others is not known", c.RoundTrip.Objects, totalText(it.Objects.Total)))
	}
}
