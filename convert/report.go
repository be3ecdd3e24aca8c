// Package convert sends ConversionReview requests to a CRD's live conversion webhook, checks
// every response the way kube-apiserver checks it (k8s.io/apiextensions-apiserver
// pkg/apiserver/conversion/webhook_converter.go), round-trips objects (A → V → A) to find
// lossy conversions, and synthesises sample objects from a version's structural schema.
//
// It has no command-line code: it takes plain values and returns a Report; package plugin
// prints it.
package convert

import (
	"sort"
	"time"
)

// Check names: stable identifiers, one per check the API server makes (plus the
// round-trip and schema checks of this tool). They appear in reports and in -o json|yaml.
const (
	CheckConnection         = "connection"          // the webhook was reached and its TLS certificate verified
	CheckTimeout            = "timeout"             // it answered within --timeout
	CheckHTTPStatus         = "http-status"         // HTTP 200
	CheckContentType        = "content-type"        // a JSON content type
	CheckResponseJSON       = "response-json"       // the body is a JSON ConversionReview
	CheckReviewKind         = "review-kind"         // apiVersion/kind of the review (v1: exact; v1beta1: decodable, as the API server)
	CheckResponsePresent    = "response-present"    // .response is set
	CheckResponseUID        = "response-uid"        // .response.uid equals the request's (v1 only, like the API server)
	CheckResultStatus       = "result-status"       // .response.result.status is Success
	CheckObjectCount        = "object-count"        // as many converted objects as sent
	CheckObjectOrder        = "object-order"        // in the order they were sent
	CheckObjectJSON         = "object-json"         // each converted object is a JSON object
	CheckAPIVersion         = "api-version"         // apiVersion is the desired one
	CheckKindUnchanged      = "kind-unchanged"      // kind unchanged
	CheckNameUnchanged      = "name-unchanged"      // metadata.name unchanged
	CheckNamespaceUnchanged = "namespace-unchanged" // metadata.namespace unchanged
	CheckUIDUnchanged       = "uid-unchanged"       // metadata.uid unchanged
	CheckMetadataPresent    = "metadata-present"    // metadata is present and an object
	CheckMetadataUnchanged  = "metadata-unchanged"  // only labels and annotations changed (others are discarded by the API server)
	CheckLabelsAnnotations  = "labels-annotations"  // changed labels and annotations are valid strings
	CheckPruned             = "pruned-fields"       // nothing the API server would prune in the target schema (data loss)
	CheckTargetSchema       = "target-schema"       // the converted object is valid in the target version's schema
	CheckRoundTrip          = "round-trip"          // A → V → A gives back the original
	CheckAPIServer          = "apiserver"           // the API server's own conversion (--via-apiserver) succeeded
)

// AllChecks lists every check in report order.
var AllChecks = []string{
	CheckConnection, CheckTimeout, CheckHTTPStatus, CheckContentType, CheckResponseJSON,
	CheckReviewKind, CheckResponsePresent, CheckResponseUID, CheckResultStatus, CheckObjectCount,
	CheckObjectOrder, CheckObjectJSON, CheckAPIVersion, CheckKindUnchanged, CheckNameUnchanged,
	CheckNamespaceUnchanged, CheckUIDUnchanged, CheckMetadataPresent, CheckMetadataUnchanged,
	CheckLabelsAnnotations, CheckPruned, CheckTargetSchema, CheckRoundTrip, CheckAPIServer,
}

// Severities of findings.
const (
	SeverityError   = "error"   // the API server would fail the conversion, or data is lost
	SeverityWarning = "warning" // the API server does not fail on it (it repairs or ignores it): reported, never fails a run unless strict
)

// warningChecks are the checks the API server itself does not fail a conversion on:
//   - content-type: its webhook client decodes any Content-Type as JSON (an unparsable one
//     fails, and is reported as an error);
//   - metadata-unchanged: it restores metadata other than labels and annotations from the
//     original (webhook_converter.go restoreObjectMeta);
//   - target-schema: it does not validate converted objects; it stores and serves them, and
//     only a write of the object in that version is rejected.
//
// Every other check is an error: the API server fails the conversion, or data is lost
// (pruned-fields, round-trip).
var warningChecks = map[string]bool{CheckContentType: true, CheckMetadataUnchanged: true, CheckTargetSchema: true}

// SeverityOf is the default severity of a failed check.
func SeverityOf(check string) string {
	if warningChecks[check] {
		return SeverityWarning
	}
	return SeverityError
}

// Report is the result of a run. Its JSON shape is stable (docs/commands/convert.md, "Output and JSON shape").
type Report struct {
	CRD           string   `json:"crd"`
	Strategy      string   `json:"strategy"`                // Webhook or None
	Webhook       string   `json:"webhook,omitempty"`       // how the webhook was reached
	ReviewVersion string   `json:"reviewVersion,omitempty"` // ConversionReview version sent
	To            string   `json:"to"`                      // target version
	RoundTrip     bool     `json:"roundTrip"`
	Notes         []string `json:"notes,omitempty"`

	Objects   int `json:"objects"`   // objects given
	Skipped   int `json:"skipped"`   // already at the target version: not sent (the API server never sends them)
	Converted int `json:"converted"` // objects that came back converted with no error (warnings allowed)
	NotSent   int `json:"notSent"`   // objects not sent (or not sent back) because the webhook became unreachable
	Requests  int `json:"requests"`  // ConversionReview requests sent

	Checks   []CheckCount `json:"checks"`
	Findings []Finding    `json:"findings"`
	// Added lists what the round trip added or normalised (Diff's DiffAdded and
	// DiffNormalised): reported, never a loss, never a failed check.
	Added []Change `json:"added,omitempty"`
	// AddedObjects is the number of objects whose round trip added or normalised something
	// (all of them, when Options.MaxAdded bounds Added).
	AddedObjects int     `json:"addedObjects,omitempty"`
	Latency      Latency `json:"latency"`

	// Unreachable is set when the webhook could not be reached (connection or TLS error): the
	// run stopped early.
	Unreachable string `json:"unreachable,omitempty"`
	// UnreachableError is the same failure as a typed error, with its Hint.
	UnreachableError *TransportError `json:"-"`

	// Bisections name the objects to blame for each request the webhook failed as a whole.
	Bisections []Bisection `json:"bisections,omitempty"`

	// Failed lists the objects that failed a check, with their JSON (for --keep); empty when
	// Options.Page was given them a page at a time.
	Failed []FailedObject `json:"-"`
	// FailedObjects counts the objects that failed a check.
	FailedObjects int `json:"-"`
}

// Keep is what reproduces the failures: the failed objects, except that for a request that
// failed as a whole and was bisected only the objects the bisection blamed.
func (r *Report) Keep() []FailedObject { return keep(r.Failed, r.Bisections) }

// keep is Keep's rule over failed objects and the bisections of their requests.
func keep(failed []FailedObject, bisections []Bisection) []FailedObject {
	var out []FailedObject
	seen := map[string]bool{}
	add := func(f FailedObject) {
		if !seen[f.Source] {
			seen[f.Source] = true
			out = append(out, f)
		}
	}
	for _, f := range failed {
		if !f.Bisected {
			add(f)
		}
	}
	for _, b := range bisections {
		for _, c := range b.Culprits {
			add(c)
		}
	}
	return out
}

// CheckCount is how many times a check passed, failed (an error) and warned.
type CheckCount struct {
	Name     string `json:"name"`
	Passed   int    `json:"passed"`
	Failed   int    `json:"failed"`
	Warnings int    `json:"warnings"`
}

// Finding is one failed check.
type Finding struct {
	Object    string `json:"object,omitempty"` // where the object came from, or namespace/name
	Direction string `json:"direction"`        // e.g. "v1beta1 -> v1"
	Check     string `json:"check"`
	Severity  string `json:"severity"`
	Path      string `json:"path,omitempty"` // JSON path in the object, e.g. .spec.port
	Detail    string `json:"detail"`
}

// Change is a difference of a round trip that loses nothing: a field the original does not
// have appeared (Kind DiffAdded), or a string came back as another spelling of the same
// duration or quantity (DiffNormalised).
type Change struct {
	Object    string `json:"object,omitempty"`
	Direction string `json:"direction"`
	Path      string `json:"path"`
	Kind      string `json:"kind"`
	Detail    string `json:"detail"`
}

// Latency summarises the webhook's response times, in milliseconds.
type Latency struct {
	Requests int     `json:"requests"`
	P50      float64 `json:"p50Ms"`
	P99      float64 `json:"p99Ms"`
	Max      float64 `json:"maxMs"`
}

// FailedObject is an input object that failed at least one check.
type FailedObject struct {
	Source string
	Object map[string]any
	// Bisected: it failed only because its request failed as a whole, and a bisection of
	// that request looked for the objects to blame (Report.Bisections).
	Bisected bool
}

// Problems counts the failed checks (errors); warnings are not problems.
func (r *Report) Problems() int {
	n := 0
	for _, c := range r.Checks {
		n += c.Failed
	}
	return n
}

// Warnings counts the checks that warned: what the API server would not fail on.
func (r *Report) Warnings() int {
	n := 0
	for _, c := range r.Checks {
		n += c.Warnings
	}
	return n
}

// tally collects check counts and findings while a run goes.
type tally struct {
	counts   map[string]*CheckCount
	findings []Finding
	added    []Change
	// addedObjects counts the objects with something added or normalised; maxAdded bounds
	// added (0: no bound).
	addedObjects, maxAdded int
	latencies              []time.Duration
}

func newTally() *tally { return &tally{counts: map[string]*CheckCount{}} }

func (t *tally) count(name string) *CheckCount {
	c, ok := t.counts[name]
	if !ok {
		c = &CheckCount{Name: name}
		t.counts[name] = c
	}
	return c
}

func (t *tally) pass(name string) { t.count(name).Passed++ }

// fail records a finding; its severity, when not given, is the check's (SeverityOf).
func (t *tally) fail(f Finding) {
	if f.Severity == "" {
		f.Severity = SeverityOf(f.Check)
	}
	if f.Severity == SeverityWarning {
		t.count(f.Check).Warnings++
	} else {
		t.count(f.Check).Failed++
	}
	t.findings = append(t.findings, f)
}

// roundTrip records the differences of a round trip of object: each loss a failed check
// (round-trip), each addition or normalisation a Change; the check passes when nothing is
// lost. It returns the number of losses.
func (t *tally) roundTrip(object, dir string, diffs []Difference) int {
	lost, added := 0, false
	for _, d := range diffs {
		if !d.Loss() {
			added = true
			t.addChanges(Change{Object: object, Direction: dir, Path: d.Path, Kind: d.Kind, Detail: d.Detail})
			continue
		}
		lost++
		t.fail(Finding{Object: object, Direction: dir, Check: CheckRoundTrip, Path: d.Path, Detail: d.Detail})
	}
	if added {
		t.addedObjects++
	}
	if lost == 0 {
		t.pass(CheckRoundTrip)
	}
	return lost
}

// addChanges keeps cs, up to maxAdded changes in all.
func (t *tally) addChanges(cs ...Change) {
	if t.maxAdded > 0 && len(t.added)+len(cs) > t.maxAdded {
		cs = cs[:max(t.maxAdded-len(t.added), 0)]
	}
	t.added = append(t.added, cs...)
}

// merge adds o's counts, findings and latencies to t.
func (t *tally) merge(o *tally) {
	for _, name := range AllChecks {
		if c, ok := o.counts[name]; ok {
			mine := t.count(name)
			mine.Passed += c.Passed
			mine.Failed += c.Failed
			mine.Warnings += c.Warnings
		}
	}
	t.findings = append(t.findings, o.findings...)
	t.addChanges(o.added...)
	t.addedObjects += o.addedObjects
	t.latencies = append(t.latencies, o.latencies...)
}

func (t *tally) checks() []CheckCount {
	var out []CheckCount
	for _, name := range AllChecks {
		if c, ok := t.counts[name]; ok {
			out = append(out, *c)
		}
	}
	return out
}

func latencySummary(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	pct := func(p float64) time.Duration {
		i := int(float64(len(s))*p+0.999999) - 1 // nearest rank
		if i < 0 {
			i = 0
		}
		if i >= len(s) {
			i = len(s) - 1
		}
		return s[i]
	}
	return Latency{Requests: len(s), P50: ms(pct(0.50)), P99: ms(pct(0.99)), Max: ms(s[len(s)-1])}
}
