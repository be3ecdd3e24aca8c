package preview

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// httpRoute is a realistic Gateway API HTTPRoute: two parent gateways, hostnames, rules with
// path, header and query matches, filters, weighted backends and timeouts.
const httpRoute = `{
  "apiVersion": "gateway.networking.k8s.io/v1",
  "kind": "HTTPRoute",
  "metadata": {"name": "%s", "namespace": "default", "labels": {"app": "store"}},
  "spec": {
    "parentRefs": [{"name": "public-gw", "sectionName": "https"}, {"name": "internal-gw"}],
    "hostnames": ["store.example.com", "shop.example.com"],
    "rules": [
      {
        "matches": [
          {"path": {"type": "PathPrefix", "value": "/cart"}, "headers": [{"name": "x-canary", "value": "true"}]},
          {"path": {"type": "Exact", "value": "/checkout"}, "method": "POST", "queryParams": [{"name": "v", "value": "2"}]}
        ],
        "filters": [
          {"type": "RequestHeaderModifier", "requestHeaderModifier": {"add": [{"name": "x-route", "value": "cart"}], "remove": ["x-debug"]}}
        ],
        "backendRefs": [{"name": "cart-v2", "port": 8080, "weight": 10}, {"name": "cart-v1", "port": 8080, "weight": 90}],
        "timeouts": {"request": "10s", "backendRequest": "5s"}
      },
      {
        "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
        "filters": [{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/store"}}}],
        "backendRefs": [{"name": "store", "port": 80}]
      }
    ]
  }
}`

func loadHTTPRoute(b *testing.B) *apiextensionsv1.CustomResourceDefinition {
	dir, ok := corpusDir()
	path := filepath.Join(dir, "gateway-api__httproutes.gateway.networking.k8s.io.yaml")
	if _, err := os.Stat(path); !ok || err != nil {
		b.Skipf("no Gateway API HTTPRoute CRD at %s (the corpus lives beside the repository clone)", path)
	}
	return readCRDFile(b, path)[0]
}

// BenchmarkPreviewHTTPRoute is preview's single-threaded throughput on a large real CRD
// (Gateway API HTTPRoute: ~430 kB, ~100 CEL rules): one create preview per iteration.
func BenchmarkPreviewHTTPRoute(b *testing.B) {
	crd := loadHTTPRoute(b)
	p, err := NewPreviewer(crd)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// warm up: the strategy (CEL compilation) is built on first use
	if r, err := p.Create(ctx, []byte(fmt.Sprintf(httpRoute, "warm")), PreviewOptions{}); err != nil || !r.Accepted() {
		b.Fatalf("preview of the sample HTTPRoute: %v %+v", err, r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r, err := p.Create(ctx, []byte(fmt.Sprintf(httpRoute, fmt.Sprintf("route-%d", i))), PreviewOptions{})
		if err != nil || !r.Accepted() {
			b.Fatalf("%v %+v", err, r)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "objects/s")
}

// BenchmarkDryRunHTTPRoute sends the same objects through server-side dry-run create on the
// local API server, one request at a time.
func BenchmarkDryRunHTTPRoute(b *testing.B) {
	crd := forServer(loadHTTPRoute(b))
	ctx := context.Background()
	if _, err := env.CreateCRD(ctx, crd.DeepCopy()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.DeleteCRD(context.Background(), crd.Name) }()
	srv := newServer(b)
	send := func(name string) {
		r, err := srv.dryRunCreate(ctx, crd, "v1", "default", []byte(fmt.Sprintf(httpRoute, name)), FieldValidationWarn)
		if err != nil || r.verdict != Accepted {
			b.Fatalf("%v %+v", err, r)
		}
	}
	send("warm")
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		send(fmt.Sprintf("route-%d", i))
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "objects/s")
}

// BenchmarkServerValidationHTTPRoute is only the API server's validation of one decoded,
// defaulted HTTPRoute (registry/customresource's strategy.Validate: OpenAPI, list types,
// embedded resources, CEL): the floor under preview's time per object.
func BenchmarkServerValidationHTTPRoute(b *testing.B) {
	crd := loadHTTPRoute(b)
	p, err := NewPreviewer(crd)
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(fmt.Sprintf(httpRoute, "route"))
	gvk, err := head(data)
	if err != nil {
		b.Fatal(err)
	}
	d, err := p.decode(data, gvk, FieldValidationWarn)
	if err != nil || d.obj == nil {
		b.Fatalf("%v %+v", err, d)
	}
	st, err := p.strategyFor("v1")
	if err != nil {
		b.Fatal(err)
	}
	ctx := genericapirequest.WithNamespace(context.Background(), "default")
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if errs := st.Validate(ctx, d.obj); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "objects/s")
}
