package doctor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testca"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env, testenv.Options{}) }

func crdClient(t testing.TB) apiextensionsclient.Interface {
	t.Helper()
	c, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func dynClient(t testing.TB) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// create registers crd for the test (deleted at its end) and returns it as the server has it.
func create(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	got, err := env.CreateCRD(context.Background(), crd)
	if err != nil {
		t.Fatalf("creating %s: %v", crd.Name, err)
	}
	t.Cleanup(func() { _ = env.DeleteCRD(context.Background(), crd.Name) })
	return got
}

// updateCRD changes the live CRD with mutate (retrying on conflict).
func updateCRD(t testing.TB, name string, mutate func(*apiextensionsv1.CustomResourceDefinition)) {
	t.Helper()
	c := crdClient(t)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(cur)
		_, err = c.ApiextensionsV1().CustomResourceDefinitions().Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating %s: %v", name, err)
	}
}

// doctorOf runs the checks over the named CRDs of the test cluster.
func doctorOf(t testing.TB, opts Options, names ...string) *Report {
	t.Helper()
	list, err := crdClient(t).ApiextensionsV1().CustomResourceDefinitions().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var all, crds []*apiextensionsv1.CustomResourceDefinition
	for i := range list.Items {
		all = append(all, &list.Items[i])
	}
	for _, n := range names {
		found := false
		for _, c := range all {
			if c.Name == n {
				crds = append(crds, c)
				found = true
			}
		}
		if !found {
			t.Fatalf("CRD %s not in the cluster", n)
		}
	}
	opts.Config = env.Config
	opts.AllCRDs = all
	r, err := Run(context.Background(), opts, crds)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func findingsOf(r *Report, crd string) []Finding {
	for _, it := range r.Items {
		if it.CRD == crd {
			return it.Findings
		}
	}
	return nil
}

func dump(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  %s %s: %s [fix: %s]\n", f.Severity, f.Check, f.Message, f.Fix)
	}
	return b.String()
}

// expect fails unless a finding of check and severity contains every substring.
func expect(t *testing.T, fs []Finding, check, severity string, subs ...string) {
	t.Helper()
	for _, f := range fs {
		if f.Check != check || f.Severity != severity {
			continue
		}
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(f.Message, s)
		}
		if ok {
			return
		}
	}
	t.Errorf("no %s %s finding with %q among:\n%s", severity, check, subs, dump(fs))
}

// expectNo fails when a finding of check has one of the severities.
func expectNo(t *testing.T, fs []Finding, check string, severities ...string) {
	t.Helper()
	for _, f := range fs {
		for _, s := range severities {
			if f.Check == check && f.Severity == s {
				t.Errorf("unexpected %s %s finding: %s\nall:\n%s", s, check, f.Message, dump(fs))
			}
		}
	}
}

func specSchema() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}}
}

func TestStorageAndVersions(t *testing.T) {
	ctx := context.Background()
	// Trips: storage switched from v1beta1 to v1 with objects stored at v1beta1 (pending), the
	// new storage version v1 deprecated, and v1beta1 unserved while still stored.
	pending := testenv.TwoVersionCRD("pending.doctor.test", "widgets", "Widget", specSchema())
	create(t, pending)
	if err := env.CreateObjects(ctx, pending, []string{"default"}, 3); err != nil {
		t.Fatal(err)
	}
	updateCRD(t, pending.Name, func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Versions[0].Storage, c.Spec.Versions[1].Storage = false, true
		c.Spec.Versions[1].Deprecated = true
		c.Spec.Versions[0].Served = false
	})
	// Passes: one version, nothing pending.
	clean := testcrd.New("clean.doctor.test", "Widget", testcrd.Versions("v1"), testcrd.Storage("v1"), testcrd.Spec(specSchema().Properties))
	create(t, clean)
	if err := env.CreateObjects(ctx, clean, []string{"default"}, 2); err != nil {
		t.Fatal(err)
	}

	r := doctorOf(t, Options{}, pending.Name, clean.Name)
	fs := findingsOf(r, pending.Name)
	expect(t, fs, CheckStorage, SeverityWarning, "migration pending", "[v1beta1, v1]")
	expect(t, fs, CheckStorage, SeverityWarning, "storage version v1 is deprecated")
	expect(t, fs, CheckStorage, SeverityWarning, "version v1beta1 is in status.storedVersions but not served")
	// v1beta1 holds objects and is not served: migrate would refuse (what it loses of them is
	// unknown), so the fix serves it again first, and the data-loss answer is unknown.
	serve := `kubectl patch crd ` + pending.Name + ` --type=json -p '[{"op":"test","path":"/spec/versions/0/name","value":"v1beta1"},{"op":"replace","path":"/spec/versions/0/served","value":true}]'`
	for _, f := range fs {
		if strings.Contains(f.Message, "migration pending") && f.Fix != serve+", then kubectl crdver migrate "+pending.Name {
			t.Errorf("fix of the pending migration: %q", f.Fix)
		}
	}
	if in := r.Summary.Incomplete; len(in) != 1 || in[0].CRD != pending.Name || in[0].Check != CheckDataLoss || !strings.Contains(in[0].Error, "v1beta1 is in status.storedVersions but not served") || !strings.Contains(in[0].Error, serve) {
		t.Errorf("incomplete %+v, want the data-loss answer for v1beta1 unknown, with the command that serves it", in)
	}
	cf := findingsOf(r, clean.Name)
	if len(cf) != 0 {
		t.Errorf("clean CRD has findings:\n%s", dump(cf))
	}
	if r.Summary.CRDs != 2 || r.Summary.Warnings < 2 || r.Summary.Errors != 0 || len(r.Summary.Incomplete) != 1 {
		t.Errorf("summary %+v", r.Summary)
	}

	// Preferred version (v1) is not the storage version (v1beta1): info.
	pref := testenv.TwoVersionCRD("pref.doctor.test", "widgets", "Widget", specSchema())
	create(t, pref)
	r = doctorOf(t, Options{}, pref.Name)
	expect(t, findingsOf(r, pref.Name), CheckVersions, SeverityInfo, "preferred version v1", "storage version v1beta1")
}

// apply server-side applies a Widget at version v with the given field manager.
func apply(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, v, name, manager string, size int64, dryRun ...string) error {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.Spec.Group + "/" + v, "kind": crd.Spec.Names.Kind,
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"size": size},
	}}
	_, err := dynClient(t).Resource(crdinfo.GVR(crd, v)).Namespace("default").Apply(context.Background(), name, obj, metav1.ApplyOptions{FieldManager: manager, DryRun: dryRun})
	return err
}

func TestStaleManagedFields(t *testing.T) {
	// v1 is the storage version; objects are applied at v1beta1 by "old-tool".
	stale := testenv.TwoVersionCRD("stale.doctor.test", "widgets", "Widget", specSchema())
	stale.Spec.Versions[0].Storage, stale.Spec.Versions[1].Storage = false, true
	create(t, stale)
	for i := 0; i < 3; i++ {
		if err := apply(t, stale, "v1beta1", fmt.Sprintf("w%d", i), "old-tool", 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := apply(t, stale, "v1", "w3", "new-tool", 1); err != nil {
		t.Fatal(err)
	}
	// Deprecated but served and still written: a versions warning naming the manager.
	updateCRD(t, stale.Name, func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Deprecated = true })
	r := doctorOf(t, Options{}, stale.Name)
	expect(t, findingsOf(r, stale.Name), CheckVersions, SeverityWarning, "deprecated version v1beta1 is still written", "old-tool (Apply, 3 objects, last 20")
	expectNo(t, findingsOf(r, stale.Name), CheckStorage, SeverityError)

	// Unserved: a storage warning.
	updateCRD(t, stale.Name, func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Served = false })
	r = doctorOf(t, Options{}, stale.Name)
	expect(t, findingsOf(r, stale.Name), CheckStorage, SeverityWarning, "3 of 4 objects hold managedFields entries of unserved version v1beta1")

	// Removed from spec.versions: an error, and the server indeed refuses the apply.
	updateCRD(t, stale.Name, func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions = c.Spec.Versions[1:] })
	// Wait until the API server uses the updated CRD (v1beta1 gone) before applying: an apply
	// that meets the old CRD succeeds and moves old-tool's entry to v1. v1beta1 was already
	// unserved, so a GET cannot tell; a dry-run apply writes nothing and fails once it has.
	gone := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := apply(t, stale, "v1", "w0", "old-tool", 2, metav1.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "invalid group/version"), nil
	})
	if gone != nil {
		t.Fatalf("the API server still used v1beta1 30s after its removal: %v", gone)
	}
	err := apply(t, stale, "v1", "w0", "old-tool", 2)
	if err == nil || !strings.Contains(err.Error(), "invalid group/version") {
		t.Fatalf("server-side apply after removing v1beta1: %v, want the kubernetes#111937 failure", err)
	}
	r = doctorOf(t, Options{}, stale.Name)
	fs := findingsOf(r, stale.Name)
	expect(t, fs, CheckStorage, SeverityError, "3 of 4 objects hold managedFields entries of v1beta1, which is not in spec.versions", "last written by old-tool")

	// Passes: objects applied only at the version in spec.
	fresh := testcrd.New("fresh.doctor.test", "Widget", testcrd.Versions("v1"), testcrd.Storage("v1"), testcrd.Spec(specSchema().Properties))
	create(t, fresh)
	if err := apply(t, fresh, "v1", "a", "new-tool", 1); err != nil {
		t.Fatal(err)
	}
	r = doctorOf(t, Options{}, fresh.Name)
	expectNo(t, findingsOf(r, fresh.Name), CheckStorage, SeverityError, SeverityWarning)
	expectNo(t, findingsOf(r, fresh.Name), CheckVersions, SeverityWarning)
}

// front is a real HTTPS server on 127.0.0.1 with the given certificate, passing every request
// on to the test webhook: it lets a test choose the serving certificate (expired, wrong host).
func front(t *testing.T, backend *testwebhook.Server, certPEM, keyPEM []byte) (string, func()) {
	t.Helper()
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse("https://" + backend.Addr)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(backend.CABundle)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	stop := func() { _ = srv.Close(); _ = l.Close() }
	t.Cleanup(stop)
	return "https://" + l.Addr().String() + "/convert", stop
}

func createCronTab(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, name string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.Spec.Group + "/v1", "kind": "CronTab",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"cronSpec": "* * * * */5", "image": "app:1", "host": "db", "port": "5432"},
	}}
	if _, err := dynClient(t).Resource(crdinfo.GVR(crd, "v1")).Namespace("default").Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestConversionWebhook(t *testing.T) {
	backend := testwebhook.StartForTest(t, testwebhook.Options{})
	now := time.Now()
	ca, err := testca.NewValid(now.Add(-time.Hour), now.Add(365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	loop := []net.IP{net.ParseIP("127.0.0.1")}
	goodCert, goodKey, err := ca.IssueValid("webhook", nil, loop, false, now.Add(-time.Hour), now.Add(200*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expiredCert, expiredKey, err := ca.IssueValid("webhook", nil, loop, false, now.Add(-48*time.Hour), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	wrongCert, wrongKey, err := ca.IssueValid("webhook", []string{"wrong.example.com"}, nil, false, now.Add(-time.Hour), now.Add(200*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := testca.NewValid(now.Add(-time.Hour), now.Add(365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	soonCA, err := testca.NewValid(now.Add(-time.Hour), now.Add(10*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	soonCert, soonKey, err := soonCA.IssueValid("webhook", nil, loop, false, now.Add(-time.Hour), now.Add(9*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}

	goodURL, _ := front(t, backend, goodCert, goodKey)
	downURL, stopDown := front(t, backend, goodCert, goodKey)
	expiredURL, _ := front(t, backend, expiredCert, expiredKey)
	wrongURL, _ := front(t, backend, wrongCert, wrongKey)
	soonURL, _ := front(t, backend, soonCert, soonKey)

	cases := []struct {
		name, group, url string
		caBundle         []byte
		want             [][]string // severity, substrings...
	}{
		{"good", "good.doctor.test", goodURL, ca.CertPEM, nil},
		{"down", "down.doctor.test", downURL, ca.CertPEM, [][]string{
			{SeverityError, "webhook is down", "connection refused"},
			{SeverityError, "at v1beta1 through the API server fails"},
		}},
		{"expired", "expired.doctor.test", expiredURL, ca.CertPEM, [][]string{{SeverityError, "serving certificate of url " + expiredURL, "expired at"}}},
		{"other-ca", "otherca.doctor.test", goodURL, otherCA.CertPEM, [][]string{{SeverityError, "does not chain to the caBundle"}}},
		{"wrong-host", "wronghost.doctor.test", wrongURL, ca.CertPEM, [][]string{{SeverityError, "does not name 127.0.0.1 (it names wrong.example.com)"}}},
		{"ca-expires-soon", "soon.doctor.test", soonURL, soonCA.CertPEM, [][]string{
			{SeverityWarning, `caBundle certificate "crdver-test-ca" expires in`},
			{SeverityWarning, "serving certificate of url " + soonURL, "expires in"},
		}},
	}
	var names []string
	for _, tc := range cases {
		crd := testcrd.With(testenv.LoadCRD(t, "crontab-webhook.yaml"), testcrd.Group(tc.group), testcrd.ShortNames(), testcrd.Webhook(tc.url, tc.caBundle, "v1", "v1beta1"))
		create(t, crd)
		if tc.name == "down" {
			// Stopped before any object exists: once the API server has called a webhook it
			// may keep using an open connection for a while after the listener closed.
			stopDown()
		}
		createCronTab(t, crd, "one")
		names = append(names, crd.Name)
	}
	r := doctorOf(t, Options{WebhookTimeout: 5 * time.Second}, names...)
	if len(r.Summary.Incomplete) != 0 {
		t.Errorf("incomplete: %+v", r.Summary.Incomplete)
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := findingsOf(r, names[i])
			if tc.want == nil {
				expectNo(t, fs, CheckWebhook, SeverityError, SeverityWarning)
				expect(t, fs, CheckWebhook, SeverityInfo, "round trip v1 -> v1beta1 -> v1 of default/one passed every check")
			}
			for _, w := range tc.want {
				expect(t, fs, CheckWebhook, w[0], w[1:]...)
			}
			// What breaks if it is down, with the object count.
			expect(t, fs, CheckWebhook, SeverityInfo, "is down: reads and writes of "+names[i]+" at v1beta1 fail (1 objects)")
		})
	}

	// The round trip finds a lossy webhook (convert's checks).
	lossyBackend := testwebhook.StartForTest(t, testwebhook.Options{})
	lossyBackend.Set(testwebhook.Lossy)
	lossyURL, _ := front(t, lossyBackend, goodCert, goodKey)
	lossy := testcrd.With(testenv.LoadCRD(t, "crontab-webhook.yaml"), testcrd.Group("lossy.doctor.test"), testcrd.ShortNames(), testcrd.Webhook(lossyURL, ca.CertPEM, "v1", "v1beta1"))
	create(t, lossy)
	createCronTab(t, lossy, "one")
	r = doctorOf(t, Options{}, lossy.Name)
	expect(t, findingsOf(r, lossy.Name), CheckWebhook, SeverityError, "round trip v1 -> v1beta1 -> v1 of default/one", "spec.port")

	// Two CRDs sharing one webhook: what breaks covers both.
	shared := testcrd.With(testenv.LoadCRD(t, "crontab-webhook.yaml"), testcrd.Group("shared.doctor.test"), testcrd.ShortNames(), testcrd.Webhook(goodURL, ca.CertPEM, "v1", "v1beta1"))
	create(t, shared)
	r = doctorOf(t, Options{SkipRoundTrip: true}, shared.Name, names[0])
	expect(t, findingsOf(r, shared.Name), CheckWebhook, SeverityInfo, "converts 2 CRDs", "1 objects of all of them")
}

func TestServiceWebhook(t *testing.T) {
	ctx := context.Background()
	crd := testcrd.With(testenv.LoadCRD(t, "crontab-webhook.yaml"), testcrd.Group("svc.doctor.test"), testcrd.ShortNames(), testcrd.Webhook("", nil, "v1", "v1beta1"))
	port := int32(443)
	crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{
		Service: &apiextensionsv1.ServiceReference{Namespace: "default", Name: "crontab-conversion", Port: &port},
	}
	create(t, crd)
	r := doctorOf(t, Options{SkipRoundTrip: true}, crd.Name)
	expect(t, findingsOf(r, crd.Name), CheckWebhook, SeverityError, "Service default/crontab-conversion does not exist")
	expect(t, findingsOf(r, crd.Name), CheckWebhook, SeverityError, "no caBundle")

	core := newCore(t)
	if err := createService(ctx, core); err != nil {
		t.Fatal(err)
	}
	r = doctorOf(t, Options{SkipRoundTrip: true}, crd.Name)
	expect(t, findingsOf(r, crd.Name), CheckWebhook, SeverityError, "has no ready endpoints")

	if err := createEndpointSlice(ctx, core, true); err != nil {
		t.Fatal(err)
	}
	r = doctorOf(t, Options{SkipRoundTrip: true}, crd.Name)
	for _, f := range findingsOf(r, crd.Name) {
		if f.Severity == SeverityError && !strings.Contains(f.Message, "no caBundle") {
			t.Errorf("with a ready endpoint: %s", f.Message)
		}
	}
	expect(t, findingsOf(r, crd.Name), CheckWebhook, SeverityInfo, "serving certificate of service default/crontab-conversion:443 not checked")
}

func TestSchema(t *testing.T) {
	ctx := context.Background()
	// A CRD of the v1beta1 era: preserveUnknownFields true, a non-structural schema, a version
	// without a schema. The API server no longer creates such a CRD (v1 rejects
	// preserveUnknownFields: true), but keeps serving one stored before: write it into etcd as
	// an older server did.
	legacy := fmt.Sprintf(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"legacies.doctor.test","uid":"7f6c1d2e-0000-4000-8000-000000000001","creationTimestamp":%q},
 "spec":{"group":"doctor.test","scope":"Namespaced","preserveUnknownFields":true,
  "names":{"plural":"legacies","singular":"legacy","kind":"Legacy","listKind":"LegacyList"},
  "conversion":{"strategy":"None"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"description":"no type"}}}}},
              {"name":"v1alpha1","served":true,"storage":false}]},
 "status":{"storedVersions":["v1"]}}`, time.Now().UTC().Format(time.RFC3339))
	if err := env.PutStoredObject(ctx, "apiextensions.k8s.io", "customresourcedefinitions", "", "legacies.doctor.test", []byte(legacy)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.DeleteCRD(context.Background(), "legacies.doctor.test") })
	if _, err := env.WaitEstablished(ctx, "legacies.doctor.test"); err != nil {
		t.Fatalf("the API server did not take up the CRD written to etcd: %v", err)
	}

	items := func(n int64) apiextensionsv1.JSONSchemaProps {
		l := int64(64)
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"items": {Type: "array", MaxItems: &n,
				Items:        &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: &l}},
				XValidations: apiextensionsv1.ValidationRules{{Rule: "self.all(x, self.exists_one(y, x == y))", Message: "items must be unique"}}},
		}}
	}
	costly := testenv.TwoVersionCRD("costly.doctor.test", "widgets", "Widget", items(500))
	create(t, costly)
	cheap := testenv.TwoVersionCRD("cheap.doctor.test", "widgets", "Widget", items(20))
	create(t, cheap)
	// The same rule over 700 items is over the API server's limit: it rejects the CRD, and the
	// estimate says so too.
	tooCostly := testenv.TwoVersionCRD("toocostly.doctor.test", "widgets", "Widget", items(700))
	if _, err := crdClient(t).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, tooCostly, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "estimated rule cost exceeds budget") {
		t.Fatalf("creating a CRD with a rule over the cost limit: %v", err)
	}
	root := testcrd.New("root.doctor.test", "Widget", testcrd.Versions("v1"), testcrd.Storage("v1"), testcrd.Spec(specSchema().Properties))
	yes := true
	root.Spec.Versions[0].Schema.OpenAPIV3Schema.XPreserveUnknownFields = &yes
	create(t, root)

	r := doctorOf(t, Options{}, "legacies.doctor.test", costly.Name, cheap.Name, root.Name)
	fs := findingsOf(r, "legacies.doctor.test")
	expect(t, fs, CheckSchema, SeverityWarning, "legacy spec.preserveUnknownFields: true")
	expect(t, fs, CheckSchema, SeverityError, "version v1: schema is not structural", "properties[spec].type")
	expect(t, fs, CheckSchema, SeverityWarning, "version v1alpha1 has no schema")
	expect(t, findingsOf(r, costly.Name), CheckSchema, SeverityWarning, "properties[items].x-kubernetes-validations[0].rule has estimated cost 7503002, 75% of the API server's limit 10000000")
	expectNo(t, findingsOf(r, cheap.Name), CheckSchema, SeverityError, SeverityWarning)
	expect(t, findingsOf(r, root.Name), CheckSchema, SeverityWarning, "x-kubernetes-preserve-unknown-fields at the root")

	rules, _ := CELCosts(mustInternal(t, tooCostly))
	if len(rules) != 1 || rules[0].Cost <= 10000000 {
		t.Errorf("estimate of the rejected rule: %+v, want over the limit", rules)
	}
}

// Entries of a deprecated version left by kubectl create (a one-time create) are not called
// "still written by": nothing writes that version again; the fix is retire, which moves them.
func TestOneTimeCreateIsNotAWriter(t *testing.T) {
	crd := testenv.TwoVersionCRD("onetime.doctor.test", "widgets", "Widget", specSchema())
	crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, true
	crd.Spec.Versions[0].Deprecated = true
	create(t, crd)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.Spec.Group + "/v1beta1", "kind": crd.Spec.Names.Kind,
		"metadata": map[string]any{"name": "created", "namespace": "default"},
		"spec":     map[string]any{"size": int64(1)},
	}}
	if _, err := dynClient(t).Resource(crdinfo.GVR(crd, "v1beta1")).Namespace("default").Create(context.Background(), obj, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	r := doctorOf(t, Options{}, crd.Name)
	fs := findingsOf(r, crd.Name)
	expect(t, fs, CheckVersions, SeverityWarning, "deprecated version v1beta1 is named by the managedFields entries of a one-time create or edit", "kubectl-create (Update, 1 objects")
	for _, f := range fs {
		if strings.Contains(f.Message, "still written by") {
			t.Errorf("a one-time create is called a writer: %s", f.Message)
		}
		if f.Check == CheckVersions && strings.Contains(f.Message, "one-time create") && !strings.Contains(f.Fix, "kubectl crdver retire "+crd.Name+" v1beta1") {
			t.Errorf("fix %q, want retire", f.Fix)
		}
	}
}

// A cluster already in the state a CRD update that drops the conversion its stored objects
// need leaves it: objects stored at v1beta1, the preferred version v1, and the webhook that
// converts them a Service that does not exist. doctor names the Service, the reads that fail,
// and what stalls with them.
func TestDroppedConversionStalls(t *testing.T) {
	crd := testcrd.With(testenv.LoadCRD(t, "crontab-webhook.yaml"), testcrd.Group("dropped.doctor.test"), testcrd.ShortNames(), testcrd.Webhook("", nil, "v1", "v1beta1"))
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == "v1beta1"
	}
	port := int32(443)
	crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{
		Service: &apiextensionsv1.ServiceReference{Namespace: "default", Name: "dropped-webhook", Port: &port},
	}
	create(t, crd)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.Spec.Group + "/v1beta1", "kind": "CronTab",
		"metadata": map[string]any{"name": "stored-old", "namespace": "default"},
		"spec":     map[string]any{"cronSpec": "* * * * */5", "hostPort": "db:5432"},
	}}
	if _, err := dynClient(t).Resource(crdinfo.GVR(crd, "v1beta1")).Namespace("default").Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fs := findingsOf(doctorOf(t, Options{}, crd.Name), crd.Name)
	expect(t, fs, CheckWebhook, SeverityError, "Service default/dropped-webhook does not exist")
	expect(t, fs, CheckWebhook, SeverityError, "reading "+crd.Name+" at v1 through the API server fails", `service "dropped-webhook" not found`,
		"v1 is the preferred version", "the garbage collector cannot collect CronTab objects", "deleting a namespace that holds one stays Terminating")
	expect(t, fs, CheckWebhook, SeverityError, "no caBundle", "which do not sign dropped-webhook.default.svc")
}

// TestDroppedConversionApplied: the CronTab CRD updated without its conversion block (strategy
// None) while objects are stored at v1beta1, one with spec.hostPort, which v1's schema lacks.
// Storage switched to v1 (storedVersions [v1beta1, v1]): the pending migration's data-loss
// check names the object and the field. Storage still v1beta1, v1 preferred: the None-read
// check names them at v1, where the API server's own read has already dropped the field.
func TestDroppedConversionApplied(t *testing.T) {
	ctx := context.Background()
	for _, storage := range []string{"v1", "v1beta1"} {
		t.Run("storage "+storage, func(t *testing.T) {
			crd := testcrd.With(testenv.LoadCRD(t, "crontab-webhook.yaml"), testcrd.Group("applied-"+storage+".doctor.test"), testcrd.ShortNames(), testcrd.Webhook("", nil, "v1", "v1beta1"))
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
			for i := range crd.Spec.Versions {
				crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == "v1beta1"
			}
			crd.Status.StoredVersions = []string{"v1beta1"}
			create(t, crd)
			ri := dynClient(t).Resource(crdinfo.GVR(crd, "v1beta1")).Namespace("default")
			for name, spec := range map[string]map[string]any{
				"stored-old": {"cronSpec": "* * * * */5", "hostPort": "db:5432"},
				"no-loss":    {"cronSpec": "* * * * */5"},
			} {
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": crd.Spec.Group + "/v1beta1", "kind": "CronTab",
					"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec,
				}}
				if _, err := ri.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if storage == "v1" {
				updateCRD(t, crd.Name, func(c *apiextensionsv1.CustomResourceDefinition) {
					for i := range c.Spec.Versions {
						c.Spec.Versions[i].Storage = c.Spec.Versions[i].Name == "v1"
					}
				})
			}
			// The API server's read at v1 has lost the field: what the finding is about.
			got, err := dynClient(t).Resource(crdinfo.GVR(crd, "v1")).Namespace("default").Get(ctx, "stored-old", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := unstructured.NestedString(got.Object, "spec", "hostPort"); ok {
				t.Fatalf("the API server kept spec.hostPort at v1: %v", got.Object["spec"])
			}

			r := doctorOf(t, Options{}, crd.Name)
			fs := findingsOf(r, crd.Name)
			if len(r.Summary.Incomplete) != 0 {
				t.Errorf("incomplete: %+v", r.Summary.Incomplete)
			}
			var loss []Finding
			for _, f := range fs {
				if f.Check == CheckDataLoss {
					loss = append(loss, f)
				}
			}
			if len(loss) != 1 || strings.Contains(loss[0].Message, "no-loss") {
				t.Fatalf("want one data-loss finding naming only stored-old, got:\n%s", dump(fs))
			}
			if storage == "v1" {
				expect(t, fs, CheckDataLoss, SeverityError, "1 objects lose fields when read at the storage version v1", "default/stored-old (.spec.hostPort)")
				return
			}
			expect(t, fs, CheckDataLoss, SeverityError, "conversion is None: 1 objects lose fields when read at the preferred version v1",
				"relabels them from v1beta1", "default/stored-old (.spec.hostPort)")
			for _, want := range []string{"restore its spec.conversion: kubectl edit crd " + crd.Name,
				"kubectl get crontabs.v1beta1." + crd.Spec.Group + " -A -o yaml",
				"kubectl crdver migrate " + crd.Name + " --to v1 --allow-data-loss"} {
				if !strings.Contains(loss[0].Fix, want) {
					t.Errorf("fix %q lacks %q", loss[0].Fix, want)
				}
			}
		})
	}
}
