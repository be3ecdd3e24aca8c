package webhookcheck

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/crdver/kubectl-crdver/convert"
)

// States of a webhook, as a Check found it.
const (
	// StateAnswers: it converted every object sent (what the round trips lose is in
	// Result.Losses: a loss, not a failure).
	StateAnswers = "answers"
	// StateFails: it answers, and the API server would fail the conversion of some objects
	// (a response it refuses, an error, a timeout).
	StateFails = "fails"
	// StateDown: it is not running: its configuration names no usable webhook, its Service
	// does not exist, lacks the port or has no ready endpoint, or nothing listens.
	StateDown = "down"
	// StateUnreachable: it does not answer here for a reason the API server shares (its
	// certificate does not verify against the caBundle, a name it lacks).
	StateUnreachable = "unreachable"
	// StateNotAsked: it could not be asked from here (no cluster, services/proxy forbidden,
	// the target given does not answer): what it does is unknown.
	StateNotAsked = "not-asked"
)

// Options of a Check.
type Options struct {
	// Kube reads the Service and its EndpointSlices; its core REST client is the service
	// proxy when Reach.Proxy is nil. nil: no cluster.
	Kube  kubernetes.Interface
	Reach Reach
	// Now is the clock for certificate expiry (zero: time.Now()).
	Now time.Time
	// Round trips of stored objects (RoundTripOptions; CRD and Transport are set by Check).
	// No Pairs: the configuration is checked, nothing is sent.
	RoundTrip RoundTripOptions
}

// Report is what a Check found about the conversion webhook of a CRD.
type Report struct {
	// Webhook is the webhook the CRD names ("service ns/name:443/path", "url …").
	Webhook string `json:"webhook"`
	// Target is the webhook asked instead, as given ("" when the CRD's own was asked).
	Target string `json:"target,omitempty"`
	// Reached says how it was reached and what TLS verification was made.
	Reached string `json:"reached,omitempty"`
	// State is one of the State constants.
	State string `json:"state"`
	// NotRunning: down because nothing answers (no Service, port or ready endpoint, nothing
	// listening), not because the configuration names no usable webhook.
	NotRunning bool          `json:"notRunning,omitempty"`
	Problems   []Problem     `json:"problems"`
	Service    *ServiceState `json:"service,omitempty"`
	// RoundTrip is what the round trips found (nil when none was made).
	RoundTrip *Result `json:"roundTrip,omitempty"`
}

// Reason is the first problem that makes the state what it is, in a sentence.
func (r *Report) Reason() string {
	if r.State == StateNotAsked && len(r.Problems) > 0 {
		return r.Problems[len(r.Problems)-1].Message // why it was not asked
	}
	for _, p := range r.Problems {
		if p.Severity == SeverityError {
			return p.Message
		}
	}
	if r.RoundTrip != nil {
		return r.RoundTrip.Summary()
	}
	return ""
}

// Check judges the conversion webhook of crd: its configuration (clientConfig,
// conversionReviewVersions, caBundle), its Service in the cluster (or, asked instead, o.Reach's
// Target), then the round trips of o.RoundTrip. The error is for a check that could not
// complete (a read of the cluster failed, a list failed, ctx ended).
func Check(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, o Options) (*Report, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Reach.Proxy == nil && o.Kube != nil {
		o.Reach.Proxy = o.Kube.CoreV1().RESTClient()
	}
	rep := &Report{State: StateAnswers, Problems: []Problem{}}
	if o.Reach.Target != nil {
		rep.Target = o.Reach.Target.String()
	}
	e, err := EndpointOf(crd)
	if err != nil {
		rep.State = StateDown
		rep.Problems = append(rep.Problems, Problem{Severity: SeverityError, Down: true, Message: err.Error(), Fix: "kubectl edit crd " + crd.Name})
		return rep, nil
	}
	rep.Webhook = e.Describe
	rep.Problems = append(rep.Problems, e.ReviewVersionProblems()...)
	bundle := crd.Spec.Conversion.Webhook.ClientConfig.CABundle
	if len(bundle) == 0 && len(o.Reach.CABundle) > 0 {
		bundle = o.Reach.CABundle
	}
	_, caProblems := e.CABundle(bundle, o.Now)
	noCA := e.Service != nil && len(bytes.TrimSpace(bundle)) == 0
	if _, from := CAInjection(crd); from != "" && len(bundle) == 0 {
		noCA = false
		caProblems = []Problem{{Severity: SeverityInfo, Message: fmt.Sprintf("no caBundle yet: cert-manager's cainjector fills it from %s once the CRD is applied", from)}}
	}
	rep.Problems = append(rep.Problems, caProblems...)
	if e.Service != nil && o.Reach.Target == nil {
		if o.Kube == nil {
			rep.State = StateNotAsked
			rep.Problems = append(rep.Problems, Problem{Severity: SeverityInfo, Message: fmt.Sprintf("%s not asked: no cluster", e.Describe)})
			return rep, nil
		}
		st, ps, err := e.ServiceCheck(ctx, o.Kube)
		if apierrors.IsForbidden(err) {
			rep.State = StateNotAsked
			rep.Problems = append(rep.Problems, Problem{Severity: SeverityInfo, Message: fmt.Sprintf("%s not asked: %v", e.Describe, err)})
			return rep, nil
		}
		if err != nil {
			return rep, err
		}
		rep.Service = st
		rep.Problems = append(rep.Problems, ps...)
		rep.NotRunning = !st.Answering()
	}
	if rep.down() {
		rep.State = StateDown
		rep.NotRunning = rep.NotRunning && !configDown(rep.Problems)
		return rep, nil
	}
	if len(o.RoundTrip.Pairs) == 0 {
		return rep, nil
	}
	tr, err := Transport(ctx, crd, rep.Service, o.Reach)
	if err != nil {
		rep.State = StateNotAsked
		rep.Problems = append(rep.Problems, Problem{Severity: SeverityInfo, Message: fmt.Sprintf("%s not asked: %v", e.Describe, err)})
		return rep, nil
	}
	rep.Reached = tr.Describe()
	rt := o.RoundTrip
	rt.CRD, rt.Transport = crd, tr
	res, err := RoundTrip(ctx, rt)
	rep.RoundTrip = res
	if err != nil {
		return rep, err
	}
	switch {
	case res.Unreachable != "":
		rep.State = unreachableState(res, o.Reach.Target != nil)
		rep.NotRunning = rep.State == StateDown
		rep.Problems = append(rep.Problems, Problem{Severity: SeverityError, Down: rep.State == StateDown,
			Message: fmt.Sprintf("%s does not answer (%s): %s", e.Describe, rep.Reached, res.Unreachable)})
	case res.FailedCount > 0:
		rep.State = StateFails
	case noCA && o.Reach.Target == nil:
		// The round trip went through the service proxy, which verifies no certificate: the
		// API server, which verifies it against its system roots, fails every conversion.
		rep.State = StateUnreachable
	}
	return rep, nil
}

// configDown: a problem that makes every conversion fail is the configuration's
// (conversionReviewVersions, caBundle), whatever runs behind the Service.
func configDown(ps []Problem) bool {
	for _, p := range ps {
		if p.Down && p.config {
			return true
		}
	}
	return false
}

func (r *Report) down() bool {
	for _, p := range r.Problems {
		if p.Down {
			return true
		}
	}
	return false
}

// unreachableState sorts a webhook that did not answer: not running (nothing listens, the
// service proxy finds no Service or endpoint), not asked (the service proxy is forbidden here;
// a target given instead that does not answer), or unreachable for a reason the API server
// shares (TLS).
func unreachableState(res *Result, target bool) string {
	msg := res.Unreachable
	switch {
	case target:
		return StateNotAsked
	case res.Hint == convert.HintServiceProxy && (strings.Contains(msg, " 403") || strings.Contains(msg, "forbidden")):
		return StateNotAsked
	case res.Hint == convert.HintServiceProxy, res.Hint == convert.HintConnect:
		return StateDown
	case res.Hint == convert.HintReachable && strings.Contains(msg, "no such host"):
		return StateDown
	}
	return StateUnreachable
}
