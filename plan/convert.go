package plan

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// ConversionSample is the round trip of sampled live objects through the new CRD's
// conversion webhook (the convert package's checks), to one target version and back.
type ConversionSample struct {
	To        string `json:"to"`
	Objects   int    `json:"objects"`
	Converted int    `json:"converted"`
	// Problems counts failed checks (a lossy round trip, a response the API server would
	// refuse); Findings lists them.
	Problems int               `json:"problems"`
	Findings []convert.Finding `json:"findings"`
	// Added is what the round trip added or normalised: reported, not a loss (convert's
	// loss rule), not a problem.
	Added       []convert.Change `json:"added,omitempty"`
	Unreachable string           `json:"unreachable,omitempty"`
}

// sampleConversion sends objs (as listed) to every other served version of next and back
// through its webhook.
func sampleConversion(ctx context.Context, next *apiextensionsv1.CustomResourceDefinition, objs []unstructured.Unstructured, tr convert.Transport) ([]ConversionSample, []string, error) {
	if strategyOf(next) != apiextensionsv1.WebhookConverter {
		return nil, []string{"conversion sample: the new CRD converts with strategy None: nothing to round-trip"}, nil
	}
	if len(objs) == 0 {
		return nil, []string{"conversion sample: no objects to round-trip"}, nil
	}
	var in []convert.Object
	own := map[string]bool{}
	for _, o := range objs {
		v := o.GroupVersionKind().Version
		if _, err := crdinfo.Lookup(next, v); err != nil {
			continue // a version the new CRD removes: nothing to send it from
		}
		own[v] = true
		name := o.GetName()
		if ns := o.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		in = append(in, convert.Object{Source: name, Object: o.Object})
	}
	var out []ConversionSample
	for _, to := range crdinfo.VersionNames(next) {
		v, _ := crdinfo.Lookup(next, to)
		if !v.Served || (own[to] && len(own) == 1) {
			continue
		}
		rep, err := convert.Run(ctx, convert.Options{CRD: next, To: to, RoundTrip: true, Transport: tr}, in)
		if err != nil {
			return out, nil, fmt.Errorf("%s: round-tripping objects through the new webhook to %s: %w", next.Name, to, err)
		}
		s := ConversionSample{To: to, Objects: rep.Objects, Converted: rep.Converted, Problems: rep.Problems(),
			Findings: rep.Findings, Added: rep.Added, Unreachable: rep.Unreachable}
		if s.Findings == nil {
			s.Findings = []convert.Finding{}
		}
		out = append(out, s)
	}
	return out, nil, nil
}
