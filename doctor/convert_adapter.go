package doctor

// The calls into the convert package, kept in this one file so that they can be re-pointed
// when convert's entry points move.

import (
	"context"
	"fmt"

	"github.com/crdver/kubectl-crdver/convert"
)

type rtFinding struct{ severity, text string }

type rtResult struct {
	unreachable string
	findings    []rtFinding
	requests    int
	maxMs       float64
}

// roundTripOne converts obj (at version from) to `to` and back through the webhook with
// convert.Run and its response checks (the API server's), one finding line per failed check.
func roundTripOne(ctx context.Context, k *checker, t *webhookTarget, from, to, name string, obj map[string]any) (*rtResult, error) {
	var tr convert.Transport
	var err error
	if t.url != nil {
		tr, err = convert.NewHTTPTransport(k.crd, convert.TransportOptions{Timeout: k.opts.WebhookTimeout})
	} else {
		if k.c.core == nil {
			return nil, fmt.Errorf("no client for the service proxy")
		}
		tr, err = convert.NewServiceProxyTransport(k.crd, k.c.core.CoreV1().RESTClient(), k.opts.WebhookTimeout)
	}
	if err != nil {
		return nil, err
	}
	rep, err := convert.Run(ctx, convert.Options{CRD: k.crd, To: to, RoundTrip: true, Transport: tr},
		[]convert.Object{{Source: name, Object: obj}})
	if err != nil {
		return nil, err
	}
	res := &rtResult{unreachable: rep.Unreachable, requests: rep.Latency.Requests, maxMs: rep.Latency.Max}
	type agg struct {
		f     convert.Finding
		count int
	}
	var order []string
	byCheck := map[string]*agg{}
	for _, f := range rep.Findings {
		a := byCheck[f.Check]
		if a == nil {
			a = &agg{f: f}
			byCheck[f.Check] = a
			order = append(order, f.Check)
		}
		a.count++
	}
	for _, c := range order {
		a := byCheck[c]
		text := fmt.Sprintf("check %s failed (%s)", c, a.f.Direction)
		if a.f.Path != "" {
			text += " at " + a.f.Path
		}
		text += ": " + a.f.Detail
		if a.count > 1 {
			text += fmt.Sprintf(" (+%d more)", a.count-1)
		}
		res.findings = append(res.findings, rtFinding{severity: a.f.Severity, text: text})
	}
	return res, nil
}
