package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testca"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

func loadCRD(t testing.TB, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "crds", name))
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// webhookCRD is the CronTab CRD pointed at srv by url.
func webhookCRD(t testing.TB, srv *testwebhook.Server, reviewVersions ...string) *apiextensionsv1.CustomResourceDefinition {
	crd := loadCRD(t, "crontab-webhook.yaml")
	crd.Spec.Conversion = srv.WebhookConversion(reviewVersions...)
	return crd
}

// cronTabs makes n v1beta1 CronTabs with uids, like objects read from the cluster.
func cronTabs(n int) []Object {
	out := make([]Object, n)
	for i := range out {
		out[i] = Object{Source: fmt.Sprintf("default/crontab-%d", i), Object: map[string]any{
			"apiVersion": "stable.example.com/v1beta1",
			"kind":       "CronTab",
			"metadata": map[string]any{
				"name": fmt.Sprintf("crontab-%d", i), "namespace": "default",
				"uid":    fmt.Sprintf("00000000-0000-0000-0000-%012d", i),
				"labels": map[string]any{"app": "backup"},
			},
			"spec": map[string]any{
				"cronSpec": "*/5 * * * *", "image": "backup:1.2", "replicas": int64(2),
				"hostPort": fmt.Sprintf("db-%d.example.com:5432", i),
			},
		}}
	}
	return out
}

// failedChecks names the checks that reported something (an error or a warning).
func failedChecks(r *Report) []string {
	var out []string
	for _, c := range r.Checks {
		if c.Failed > 0 || c.Warnings > 0 {
			out = append(out, c.Name)
		}
	}
	sort.Strings(out)
	return out
}

func transport(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition, opts TransportOptions) Transport {
	t.Helper()
	tr, err := NewHTTPTransport(crd, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestWebhookMisbehaviour: each misbehaviour of the webhook is caught by its own named check,
// and only by it; the well-behaved webhook passes clean, round trip included.
func TestWebhookMisbehaviour(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	srv.SetDelay(2 * time.Second)
	crd := webhookCRD(t, srv)
	tr := transport(t, crd, TransportOptions{Timeout: 300 * time.Millisecond})
	cases := []struct {
		behaviour testwebhook.Behaviour
		roundTrip bool
		want      []string
	}{
		{testwebhook.Good, true, nil},
		{testwebhook.WrongUID, false, []string{CheckResponseUID}},
		{testwebhook.WrongCount, false, []string{CheckObjectCount}},
		{testwebhook.Reorder, false, []string{CheckObjectOrder}},
		{testwebhook.WrongAPIVersion, false, []string{CheckAPIVersion}},
		{testwebhook.WrongKind, false, []string{CheckKindUnchanged}},
		{testwebhook.Rename, false, []string{CheckNameUnchanged}},
		{testwebhook.ChangeNamespace, false, []string{CheckNamespaceUnchanged}},
		{testwebhook.ChangeUID, false, []string{CheckUIDUnchanged}},
		{testwebhook.ChangeMetadata, false, []string{CheckMetadataUnchanged}},
		{testwebhook.BadLabel, false, []string{CheckLabelsAnnotations}},
		{testwebhook.NoMetadata, false, []string{CheckMetadataPresent, CheckNameUnchanged, CheckNamespaceUnchanged, CheckUIDUnchanged}},
		{testwebhook.Failed, false, []string{CheckResultStatus}},
		{testwebhook.Non200, false, []string{CheckHTTPStatus}},
		{testwebhook.WrongContentType, false, []string{CheckContentType}},
		{testwebhook.MalformedJSON, false, []string{CheckResponseJSON}},
		{testwebhook.WrongReviewKind, false, []string{CheckReviewKind}},
		{testwebhook.NoReviewKind, false, []string{CheckReviewKind}},
		{testwebhook.NoResponse, false, []string{CheckResponsePresent}},
		{testwebhook.Slow, false, []string{CheckTimeout}},
		{testwebhook.Lossy, true, []string{CheckRoundTrip}},
		{testwebhook.UnknownField, false, []string{CheckPruned}},
		{testwebhook.InvalidInTarget, false, []string{CheckTargetSchema}},
	}
	for _, tc := range cases {
		name := string(tc.behaviour)
		if name == "" {
			name = "well-behaved"
		}
		t.Run(name, func(t *testing.T) {
			srv.Set(tc.behaviour)
			defer srv.Set(testwebhook.Good)
			rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", RoundTrip: tc.roundTrip, Transport: tr}, cronTabs(3))
			if err != nil {
				t.Fatal(err)
			}
			if rep.Unreachable != "" {
				t.Fatalf("unreachable: %s", rep.Unreachable)
			}
			if diff := cmp.Diff(tc.want, failedChecks(rep)); diff != "" {
				t.Errorf("failed checks (-want +got):\n%s\nfindings: %+v", diff, rep.Findings)
			}
			if len(tc.want) == 0 {
				if rep.Converted != 3 || len(rep.Findings) != 0 || len(rep.Failed) != 0 {
					t.Errorf("well-behaved webhook: converted %d of 3, findings %+v", rep.Converted, rep.Findings)
				}
				return
			}
			if warning := SeverityOf(tc.want[0]) == SeverityWarning; warning {
				// The API server would not fail on it: a warning, the objects are converted,
				// and no error is counted.
				if rep.Converted != 3 || rep.Problems() != 0 || rep.Warnings() == 0 || len(rep.Failed) != 0 {
					t.Errorf("converted %d, problems %d, warnings %d, failed %d; want 3, 0, >0, 0", rep.Converted, rep.Problems(), rep.Warnings(), len(rep.Failed))
				}
				for _, f := range rep.Findings {
					if f.Severity != SeverityWarning {
						t.Errorf("finding %+v: want a warning", f)
					}
				}
			} else if len(rep.Failed) == 0 || rep.Converted == 3 || rep.Problems() == 0 {
				t.Errorf("no object marked as failed (converted %d)", rep.Converted)
			}
			for _, f := range rep.Findings {
				if f.Detail == "" || f.Direction == "" || f.Object == "" {
					t.Errorf("finding lacks detail, direction or object: %+v", f)
				}
			}
		})
	}
}

// TestLossyRoundTripFinding: the lossy webhook's loss is reported at the JSON path of the lost data.
func TestLossyRoundTripFinding(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crd := webhookCRD(t, srv)
	srv.Set(testwebhook.Lossy)
	rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", RoundTrip: true, Transport: transport(t, crd, TransportOptions{})}, cronTabs(1))
	if err != nil {
		t.Fatal(err)
	}
	want := []Finding{{Object: "default/crontab-0", Direction: "v1beta1 -> v1 -> v1beta1", Check: CheckRoundTrip, Severity: SeverityError,
		Path: ".spec.hostPort", Detail: `changed: "db-0.example.com:5432" became "db-0.example.com"`}}
	if diff := cmp.Diff(want, rep.Findings); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	if rep.Requests != 2 || rep.Latency.Requests != 2 {
		t.Errorf("requests %d, latency samples %d; want 2 (there and back)", rep.Requests, rep.Latency.Requests)
	}
}

// TestRequests: fresh UIDs, batching, objects at the target version not sent, review version.
func TestRequests(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	objs := cronTabs(7)
	// One object already at v1: never sent.
	v1 := objs[6].Object
	v1["apiVersion"] = "stable.example.com/v1"
	spec := v1["spec"].(map[string]any)
	delete(spec, "hostPort")

	t.Run("batches and fresh uids", func(t *testing.T) {
		crd := webhookCRD(t, srv)
		var uids []string
		newUID := func() string { u := fmt.Sprintf("uid-%d", len(uids)); uids = append(uids, u); return u }
		before := srv.Requests()
		rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", BatchSize: 4, Transport: transport(t, crd, TransportOptions{}),
			NewUID: func() typesUID { return typesUID(newUID()) }}, objs)
		if err != nil {
			t.Fatal(err)
		}
		if got := srv.Requests() - before; got != 2 || rep.Requests != 2 {
			t.Errorf("6 objects to send in batches of 4: server saw %d requests, report says %d; want 2", got, rep.Requests)
		}
		if rep.Skipped != 1 || rep.Converted != 6 || rep.Problems() != 0 {
			t.Errorf("skipped %d (want 1), converted %d (want 6), problems %d: %+v", rep.Skipped, rep.Converted, rep.Problems(), rep.Findings)
		}
		if rep.ReviewVersion != "v1" {
			t.Errorf("review version %q, want v1 (first of conversionReviewVersions)", rep.ReviewVersion)
		}
		if len(uids) != 2 || uids[0] == uids[1] {
			t.Errorf("uids %v", uids)
		}
	})
	t.Run("random uids differ per request", func(t *testing.T) {
		seen := map[string]bool{}
		for range 3 {
			u := string(newRandomUID())
			if seen[u] {
				t.Fatalf("uid %s repeated", u)
			}
			seen[u] = true
		}
	})
	t.Run("v1beta1 review skips the uid check like the API server", func(t *testing.T) {
		crd := webhookCRD(t, srv, "v1beta1", "v1")
		srv.Set(testwebhook.WrongUID)
		defer srv.Set(testwebhook.Good)
		rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", Transport: transport(t, crd, TransportOptions{})}, objs[:2])
		if err != nil {
			t.Fatal(err)
		}
		if rep.ReviewVersion != "v1beta1" || rep.Problems() != 0 {
			t.Errorf("review %s, problems %+v", rep.ReviewVersion, rep.Findings)
		}
		// The override sends v1, where the uid is checked.
		rep, err = Run(context.Background(), Options{CRD: crd, To: "v1", ReviewVersion: "v1", Transport: transport(t, crd, TransportOptions{})}, objs[:2])
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{CheckResponseUID}, failedChecks(rep)); diff != "" {
			t.Errorf("--review-version v1 (-want +got):\n%s", diff)
		}
	})
	t.Run("no supported review version", func(t *testing.T) {
		crd := webhookCRD(t, srv, "v2")
		_, err := Run(context.Background(), Options{CRD: crd, To: "v1", Transport: transport(t, crd, TransportOptions{})}, objs[:1])
		if err == nil || !strings.Contains(err.Error(), "no supported version") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("unknown target version", func(t *testing.T) {
		crd := webhookCRD(t, srv)
		_, err := Run(context.Background(), Options{CRD: crd, To: "v3", Transport: transport(t, crd, TransportOptions{})}, objs[:1])
		if err == nil || !strings.Contains(err.Error(), `version "v3" is not in spec.versions`) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("object of another kind", func(t *testing.T) {
		crd := webhookCRD(t, srv)
		bad := []Object{{Source: "x.yaml (document 1)", Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}}
		_, err := Run(context.Background(), Options{CRD: crd, To: "v1", Transport: transport(t, crd, TransportOptions{})}, bad)
		if err == nil || !strings.HasPrefix(err.Error(), "x.yaml (document 1): apiVersion \"v1\" is not a version of crontabs.stable.example.com") {
			t.Errorf("err = %v", err)
		}
	})
}

// TestTransports: url, service through a local address with TLS verified against the caBundle
// with the service DNS name, wrong CA, wrong name, unreachable, client certificates.
func TestTransports(t *testing.T) {
	svcName := "crontab-conversion.default.svc"
	srv := testwebhook.StartForTest(t, testwebhook.Options{DNSNames: []string{svcName}})
	serviceCRD := func(caBundle []byte) *apiextensionsv1.CustomResourceDefinition {
		crd := loadCRD(t, "crontab-webhook.yaml")
		port, path := int32(443), "/convert"
		crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{
			Service:  &apiextensionsv1.ServiceReference{Namespace: "default", Name: "crontab-conversion", Port: &port, Path: &path},
			CABundle: caBundle,
		}
		return crd
	}
	otherCA, err := testca.New()
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, opts TransportOptions) *Report {
		t.Helper()
		rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", Transport: transport(t, crd, opts)}, cronTabs(2))
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	t.Run("service via --webhook-address, verified as the service name", func(t *testing.T) {
		crd := serviceCRD(srv.CABundle)
		rep := run(t, crd, TransportOptions{Address: srv.Addr})
		if rep.Problems() != 0 || rep.Unreachable != "" {
			t.Fatalf("problems: %+v %s", rep.Findings, rep.Unreachable)
		}
		mustContain(t, rep.Webhook, "service default/crontab-conversion:443/convert via "+srv.Addr, "TLS verified against caBundle as "+svcName)
	})
	t.Run("service without an address", func(t *testing.T) {
		_, err := NewHTTPTransport(serviceCRD(srv.CABundle), TransportOptions{})
		var sa *ServiceAddressError
		if !errors.As(err, &sa) || sa.Name != "crontab-conversion" || sa.Port != 443 || strings.Contains(err.Error(), "--") {
			t.Errorf("err = %v, want a ServiceAddressError naming no flag", err)
		}
	})
	t.Run("caBundle of another CA", func(t *testing.T) {
		rep := run(t, serviceCRD(otherCA.CertPEM), TransportOptions{Address: srv.Addr})
		if rep.Unreachable == "" || !strings.Contains(rep.Unreachable, "not signed by the caBundle") {
			t.Errorf("unreachable = %q", rep.Unreachable)
		}
		if diff := cmp.Diff([]string{CheckConnection}, failedChecks(rep)); diff != "" {
			t.Error(diff)
		}
	})
	t.Run("--ca-file overrides the caBundle", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(f, srv.CABundle, 0o600); err != nil {
			t.Fatal(err)
		}
		if rep := run(t, serviceCRD(otherCA.CertPEM), TransportOptions{Address: srv.Addr, CAFile: f}); rep.Problems() != 0 {
			t.Errorf("problems: %+v", rep.Findings)
		}
	})
	t.Run("--insecure-skip-tls-verify", func(t *testing.T) {
		rep := run(t, serviceCRD(otherCA.CertPEM), TransportOptions{Address: srv.Addr, InsecureSkipVerify: true})
		if rep.Problems() != 0 || !strings.Contains(rep.Webhook, "TLS not verified") {
			t.Errorf("problems: %+v, webhook %q", rep.Findings, rep.Webhook)
		}
	})
	t.Run("certificate without the service name", func(t *testing.T) {
		plain := testwebhook.StartForTest(t, testwebhook.Options{})
		rep := run(t, serviceCRD(plain.CABundle), TransportOptions{Address: plain.Addr})
		if !strings.Contains(rep.Unreachable, "subject alternative name") {
			t.Errorf("unreachable = %q", rep.Unreachable)
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		gone := testwebhook.StartForTest(t, testwebhook.Options{})
		crd := webhookCRD(t, gone)
		gone.Close()
		rep := run(t, crd, TransportOptions{})
		if !strings.Contains(rep.Unreachable, "cannot connect") || rep.Requests != 1 {
			t.Errorf("unreachable = %q after %d requests", rep.Unreachable, rep.Requests)
		}
		// Three batches: the first failed to connect, the others were never sent.
		rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", BatchSize: 1, RoundTrip: true, Transport: transport(t, crd, TransportOptions{})}, cronTabs(3))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Requests != 1 || len(rep.Failed) != 1 || rep.NotSent != 2 || rep.Converted != 0 {
			t.Errorf("requests %d, failed %d, not sent %d, converted %d; want 1, 1, 2, 0", rep.Requests, len(rep.Failed), rep.NotSent, rep.Converted)
		}
	})
	t.Run("client certificate", func(t *testing.T) {
		mtls := testwebhook.StartForTest(t, testwebhook.Options{RequireClientCert: true})
		crd := webhookCRD(t, mtls)
		rep := run(t, crd, TransportOptions{})
		if rep.Unreachable == "" {
			t.Errorf("a webhook demanding a client certificate accepted none")
		}
		dir := t.TempDir()
		cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
		_ = os.WriteFile(cert, mtls.ClientCert, 0o600)
		_ = os.WriteFile(key, mtls.ClientKey, 0o600)
		if rep := run(t, crd, TransportOptions{ClientCert: cert, ClientKey: key}); rep.Problems() != 0 {
			t.Errorf("with --client-cert: %+v %s", rep.Findings, rep.Unreachable)
		}
	})
}

// TestStrategyNone: None conversion switches apiVersion and prunes in the target schema.
func TestStrategyNone(t *testing.T) {
	crd := loadCRD(t, "crontab.yaml")
	rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", RoundTrip: true}, cronTabs(1))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Strategy != "None" || rep.Requests != 0 {
		t.Errorf("strategy %q, requests %d", rep.Strategy, rep.Requests)
	}
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.Check+" "+f.Direction+" "+f.Path)
	}
	want := []string{
		"pruned-fields v1beta1 -> v1 .spec.hostPort",
		"round-trip v1beta1 -> v1 -> v1beta1 .spec.hostPort",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

func mustContain(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%q does not contain %q", got, w)
		}
	}
}

type typesUID = types.UID

var newRandomUID = uuid.NewUUID
