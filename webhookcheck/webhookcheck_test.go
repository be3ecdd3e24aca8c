package webhookcheck

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/internal/testca"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"https://127.0.0.1:9443/convert", "https://127.0.0.1:9443/convert", ""},
		{"sandbox/crontab-webhook", "sandbox/crontab-webhook", ""},
		{"sandbox/crontab-webhook:8443", "sandbox/crontab-webhook:8443", ""},
		{"http://127.0.0.1:9443", "", "a webhook URL is https://HOST:PORT[/PATH]"},
		{"crontab-webhook", "", "give https://HOST:PORT[/PATH] or NAMESPACE/SERVICE[:PORT]"},
		{"sandbox/crontab-webhook:https", "", `the port "https" is not a number`},
		{"a/b/c", "", "give https://HOST:PORT[/PATH] or NAMESPACE/SERVICE[:PORT]"},
	} {
		got, err := ParseTarget(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got.String() != tc.want):
			t.Errorf("%q: %v %v, want %s", tc.in, got, err, tc.want)
		}
	}
}

func webhookCRD(cc *apiextensionsv1.WebhookClientConfig, reviewVersions ...string) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "things.x.test"
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: cc, ConversionReviewVersions: reviewVersions}}
	return crd
}

// The configuration checks, without a cluster: what the API server cannot call, a caBundle
// that verifies nothing, a service webhook without a caBundle.
func TestConfigProblems(t *testing.T) {
	url, port := "https://127.0.0.1:1/convert", int32(8443)
	if _, err := EndpointOf(webhookCRD(nil, "v1")); err == nil || !strings.Contains(err.Error(), "without spec.conversion.webhook.clientConfig") {
		t.Errorf("no clientConfig: %v", err)
	}
	if _, err := EndpointOf(webhookCRD(&apiextensionsv1.WebhookClientConfig{}, "v1")); err == nil || !strings.Contains(err.Error(), "neither url nor service") {
		t.Errorf("empty clientConfig: %v", err)
	}
	e, err := EndpointOf(webhookCRD(&apiextensionsv1.WebhookClientConfig{URL: &url}, "v2"))
	if err != nil {
		t.Fatal(err)
	}
	if ps := e.ReviewVersionProblems(); len(ps) != 1 || !ps[0].Down || !strings.Contains(ps[0].Message, "holds neither v1 nor v1beta1") {
		t.Errorf("review versions: %+v", ps)
	}
	if _, ps := e.CABundle([]byte("not a certificate"), time.Now()); len(ps) != 1 || ps[0].Severity != SeverityError || !ps[0].Down {
		t.Errorf("garbage caBundle: %+v", ps)
	}
	if _, ps := e.CABundle(nil, time.Now()); len(ps) != 1 || ps[0].Severity != SeverityInfo {
		t.Errorf("url without a caBundle: %+v", ps)
	}
	svc, err := EndpointOf(webhookCRD(&apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "ns", Name: "hook", Port: &port}}, "v1"))
	if err != nil || svc.Describe != "service ns/hook:8443" || svc.Name != "hook.ns.svc" {
		t.Fatalf("service endpoint %+v %v", svc, err)
	}
	if _, ps := svc.CABundle(nil, time.Now()); len(ps) != 1 || ps[0].Severity != SeverityError || ps[0].Down || !strings.Contains(ps[0].Message, "which do not sign hook.ns.svc") {
		t.Errorf("service without a caBundle: %+v", ps)
	}
	ca, err := testca.NewValid(time.Now().Add(-time.Hour), time.Now().Add(72*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if pool, ps := svc.CABundle(ca.CertPEM, time.Now()); pool == nil || len(ps) != 1 || !strings.Contains(ps[0].Message, "expires in 2 days") {
		t.Errorf("caBundle expiring: %+v", ps)
	}
}

// CABundleFor: a caBundle cert-manager's cainjector fills after the apply is verified with the
// live CRD's, injected from the same source.
func TestCABundleFor(t *testing.T) {
	cc := func(b []byte) *apiextensionsv1.WebhookClientConfig {
		return &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "ns", Name: "hook"}, CABundle: b}
	}
	next, live := webhookCRD(cc(nil), "v1"), webhookCRD(cc([]byte("PEM")), "v1")
	if b, note := CABundleFor(next, live); b != nil || note != "" {
		t.Errorf("no annotation: %q %q", b, note)
	}
	next.Annotations = map[string]string{InjectCAFrom: "ns/cert"}
	if b, note := CABundleFor(next, live); b != nil || !strings.Contains(note, "fills it from ns/cert after the apply") {
		t.Errorf("live not injected: %q %q", b, note)
	}
	live.Annotations = map[string]string{InjectCAFrom: "ns/cert"}
	if b, note := CABundleFor(next, live); string(b) != "PEM" || !strings.Contains(note, "the live CRD's") {
		t.Errorf("live injected: %q %q", b, note)
	}
}

func cronTabs(n int) []convert.Object {
	var out []convert.Object
	for i := 0; i < n; i++ {
		out = append(out, convert.Object{Source: fmt.Sprintf("default/c%d", i), Object: map[string]any{
			"apiVersion": "stable.example.com/v1beta1", "kind": "CronTab",
			"metadata": map[string]any{"name": fmt.Sprintf("c%d", i), "namespace": "default"},
			"spec":     map[string]any{"cronSpec": "* * * * */5", "image": "img", "hostPort": fmt.Sprintf("db:%d", 5432+i)}}})
	}
	return out
}

// Check and RoundTrip against a real webhook by url: every object round-tripped, each
// misbehaviour named per object (a failure of the whole request too), a webhook that is gone
// is down.
func TestCheckThroughAWebhook(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crd := testenv.LoadCRD(t, "crontab-webhook.yaml")
	crd.Spec.Conversion = srv.WebhookConversion("v1")
	objs := cronTabs(3)
	check := func() *Report {
		t.Helper()
		rep, err := Check(context.Background(), crd, Options{Reach: Reach{Timeout: time.Second}, RoundTrip: RoundTripOptions{
			Pairs: []Pair{{From: "v1beta1", To: "v1"}},
			List:  func(string) convert.Source { return convert.SliceSource(objs) }}})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := check()
	if rep.State != StateAnswers || rep.RoundTrip.Objects != 3 || rep.RoundTrip.Pairs[0].Converted != 3 || !strings.Contains(rep.Reached, "TLS verified against caBundle as 127.0.0.1") {
		t.Fatalf("good: %+v %+v", rep, rep.RoundTrip)
	}
	for _, tc := range []struct {
		b     testwebhook.Behaviour
		state string
		check string
		whole bool
	}{
		{testwebhook.WrongUID, StateFails, convert.CheckResponseUID, true},
		{testwebhook.WrongAPIVersion, StateFails, convert.CheckAPIVersion, false},
		{testwebhook.Failed, StateFails, convert.CheckResultStatus, false}, // bisected: each fails alone
		{testwebhook.Lossy, StateAnswers, convert.CheckRoundTrip, false},
	} {
		srv.Set(tc.b)
		rep := check()
		rt := rep.RoundTrip
		var named []string
		for _, e := range rt.Failed {
			if e.Check == tc.check && strings.HasPrefix(e.Detail, "its request failed as a whole") == tc.whole && (tc.check != convert.CheckResultStatus || strings.HasPrefix(e.Detail, "blamed by a bisection")) {
				named = append(named, e.Object)
			}
		}
		for _, l := range rt.Losses {
			if tc.check == convert.CheckRoundTrip && slices.Contains(l.Fields, ".spec.hostPort") {
				named = append(named, l.Object)
			}
		}
		if rep.State != tc.state || len(named) != 3 {
			t.Errorf("%s: state %s, named %v: %+v", tc.b, rep.State, named, rt)
		}
	}
	srv.Set(testwebhook.Good)
	srv.Close()
	if rep := check(); rep.State != StateDown || !strings.Contains(rep.Reason(), "connection refused") {
		t.Errorf("gone: %s %q", rep.State, rep.Reason())
	}
}

// A service webhook with no cluster and no target is not asked; a target URL is, verified as
// the service's name (or not verified, and said, without a caBundle).
func TestTransportOfAServiceWebhook(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{DNSNames: []string{"hook.ns.svc"}})
	port := int32(443)
	crd := testenv.LoadCRD(t, "crontab-webhook.yaml")
	crd.Spec.Conversion = webhookCRD(&apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "ns", Name: "hook", Port: &port}, CABundle: srv.CABundle}, "v1").Spec.Conversion
	if _, err := Transport(context.Background(), crd, nil, Reach{}); err != ErrNoWay {
		t.Errorf("no cluster: %v", err)
	}
	target, _ := ParseTarget(srv.URL)
	tr, err := Transport(context.Background(), crd, nil, Reach{Target: target})
	if err != nil || tr.Describe() != "service ns/hook:443/convert via "+srv.Addr+", TLS verified against caBundle as hook.ns.svc" {
		t.Errorf("target: %v %v", tr, err)
	}
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = nil
	tr, err = Transport(context.Background(), crd, nil, Reach{Target: target, CANote: "cert-manager's cainjector fills it from ns/cert after the apply (cert-manager.io/inject-ca-from)"})
	if err != nil || !strings.Contains(tr.Describe(), "TLS not verified") || !strings.Contains(tr.Describe(), "the CRD has no caBundle to verify it with (cert-manager's cainjector fills it from ns/cert") {
		t.Errorf("target without a caBundle: %v %v", tr, err)
	}
}
