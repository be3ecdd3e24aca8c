package doctor

// The round trip of one object through webhookcheck (convert's checks), its findings worded
// one line per failed check.

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

type rtFinding struct{ severity, text string }

type rtResult struct {
	*webhookcheck.Result
	findings []rtFinding
}

// roundTripOne converts obj (at version from) to `to` and back through the webhook, one
// finding line per failed check.
func roundTripOne(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, st *webhookcheck.ServiceState, reach webhookcheck.Reach, from, to, name string, obj map[string]any) (*rtResult, error) {
	tr, err := webhookcheck.Transport(ctx, crd, st, reach)
	if err != nil {
		return nil, err
	}
	res, err := webhookcheck.RoundTrip(ctx, webhookcheck.RoundTripOptions{CRD: crd, Transport: tr, Pairs: []webhookcheck.Pair{{From: from, To: to}},
		List: func(string) convert.Source { return convert.SliceSource([]convert.Object{{Source: name, Object: obj}}) }})
	if err != nil {
		return nil, err
	}
	out := &rtResult{Result: res}
	type agg struct {
		e     webhookcheck.ObjectError
		sev   string
		count int
	}
	var order []string
	byCheck := map[string]*agg{}
	add := func(e webhookcheck.ObjectError, sev string) {
		a := byCheck[e.Check]
		if a == nil {
			a = &agg{e: e, sev: sev}
			byCheck[e.Check] = a
			order = append(order, e.Check)
		}
		a.count++
	}
	for _, e := range res.Failed {
		add(e, SeverityError)
	}
	for _, l := range res.Losses {
		for _, f := range l.Fields {
			add(webhookcheck.ObjectError{Object: l.Object, Direction: l.Direction, Check: convert.CheckRoundTrip, Detail: f + ": lost"}, SeverityError)
		}
	}
	for _, w := range res.Warnings {
		add(w, SeverityWarning)
	}
	for _, c := range order {
		a := byCheck[c]
		text := fmt.Sprintf("check %s failed (%s): %s", c, a.e.Direction, a.e.Detail)
		if a.count > 1 {
			text += fmt.Sprintf(" (+%d more)", a.count-1)
		}
		out.findings = append(out.findings, rtFinding{severity: a.sev, text: text})
	}
	return out, nil
}
