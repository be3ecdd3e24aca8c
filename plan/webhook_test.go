package plan

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// TestPlanConvertSample: CronTabs stored under a CRD whose webhook works; the new CRD points at
// another webhook deployment. --convert-sample round-trips live objects through the new one: a
// lossy webhook is reported (breaking), a good one is not.
func TestPlanConvertSample(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	good := testwebhook.StartForTest(t, testwebhook.Options{})
	live := regroup(readCRD(t, filepath.Join("..", "testdata", "crds", "crontab-webhook.yaml")), "conv.plan.example.com")
	live.Spec.Conversion = good.WebhookConversion("v1", "v1beta1")
	if _, err := env.CreateCRD(ctx, live.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: live.Spec.Group, Version: "v1", Resource: "crontabs"}
	for i := 0; i < 4; i++ {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": live.Spec.Group + "/v1", "kind": "CronTab",
			"metadata": map[string]any{"name": fmt.Sprintf("c%d", i), "namespace": "default"},
			"spec":     map[string]any{"cronSpec": "* * * * */5", "image": "img", "host": "db", "port": fmt.Sprint(5432 + i)}}}
		if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, live.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, lossy := range []bool{false, true} {
		t.Run(fmt.Sprintf("lossy=%v", lossy), func(t *testing.T) {
			other := testwebhook.StartForTest(t, testwebhook.Options{})
			if lossy {
				other.Set(testwebhook.Lossy)
			}
			next := cur.DeepCopy()
			next.Spec.Conversion = other.WebhookConversion("v1")
			tr, err := convert.NewHTTPTransport(next, convert.TransportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			src := NewClusterSource(dyn, gvr, 500)
			it, err := Plan(ctx, cur, next, src, Options{ConvertSample: 3, ConvertTransport: tr})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(it.Conversion, func(s string) bool { return s == "webhook endpoint "+good.URL+" → "+other.URL }) {
				t.Errorf("conversion changes: %q", it.Conversion)
			}
			if len(it.ConversionSample) != 1 || it.ConversionSample[0].To != "v1beta1" || it.ConversionSample[0].Objects != 3 {
				t.Fatalf("conversion sample: %+v", it.ConversionSample)
			}
			s := it.ConversionSample[0]
			if lossy != (s.Problems > 0) || lossy != it.Breaking || other.Requests() == 0 {
				t.Errorf("lossy %v: problems %d, findings %+v, breaking %v, requests %d", lossy, s.Problems, s.Findings, it.Breaking, other.Requests())
			}
			if len(it.Objects.Findings) != 0 || it.Objects.Evaluated != 4 {
				t.Errorf("objects: %+v", it.Objects)
			}
		})
	}
}
