package pager_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/crdver/kubectl-crdver/internal/pager"
	"github.com/crdver/kubectl-crdver/internal/testenv"
)

var env *testenv.Env

// ListFromCacheSnapshot is off so that continued lists are served by etcd: a continue token
// etcd has compacted past is then answered 410 at once, as on any cluster once the watch
// cache's snapshots of that revision are gone (minutes after the list began).
func TestMain(m *testing.M) {
	testenv.Main(m, &env, testenv.Options{APIServerArgs: []string{"--feature-gates=ListFromCacheSnapshot=false"}})
}

const group = "pager.example.com"

// fixture creates a namespaced CRD (widgets) with n objects in namespace "default", written
// straight into etcd, and returns their keys in list order.
func fixture(t *testing.T, n int) []string {
	t.Helper()
	ctx := context.Background()
	crd := testenv.TwoVersionCRD(group, "widgets", "Widget", apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)})
	env.CreateCRDForTest(t, crd)
	var keys []string
	err := env.PutObjects(ctx, group, "widgets", n, func(i int) (string, string, []byte) {
		name := fmt.Sprintf("w-%03d", i)
		b, _ := json.Marshal(map[string]any{"apiVersion": group + "/v1beta1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": "default", "uid": fmt.Sprintf("uid-%d", i), "creationTimestamp": "2026-01-01T00:00:00Z"},
			"spec":     map[string]any{"i": i}})
		return "default", name, b
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		keys = append(keys, fmt.Sprintf("default/w-%03d", i))
	}
	waitListed(t, group, n)
	return keys
}

// waitListed waits until the API server lists the n widgets of group (written straight into
// etcd, they reach it through its watch).
func waitListed(t *testing.T, group string, n int) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	for try := 0; ; try++ {
		l, err := dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{})
		if err == nil && len(l.Items) == n {
			return
		}
		if try > 300 {
			t.Fatalf("the API server lists %v objects, want %d (%v)", l, n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// compactingLister lists with list, but compacts etcd before every continued page: each continue
// token the API server handed out has expired by the time it is used.
func compactingLister[L pager.List](t *testing.T, list pager.Lister[L], seen *[]string) pager.Lister[L] {
	return func(ctx context.Context, o metav1.ListOptions) (L, error) {
		*seen = append(*seen, o.Continue)
		if o.Continue != "" {
			if _, err := env.Compact(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return list(ctx, o)
	}
}

// A list of 95 objects in pages of 10, etcd compacted before every page after the first:
// every continued page is answered 410, and the pager resumes each time from the token the
// 410 carries. Every object is listed once, in order, and nothing is listed from the start
// again.
func TestPagerResumesAfterCompaction(t *testing.T) {
	keys := fixture(t, 95)
	ctx := context.Background()
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	t.Run("dynamic", func(t *testing.T) {
		var asked []string
		ri := dynamic.NewForConfigOrDie(env.Config).Resource(gvr)
		p := pager.New(compactingLister(t, ri.List, &asked), pager.Options{Limit: 10})
		var got []string
		err := pager.Each(ctx, p, func(l *unstructured.UnstructuredList) error {
			for _, u := range l.Items {
				got = append(got, u.GetNamespace()+"/"+u.GetName())
			}
			return nil
		})
		check(t, err, got, keys, p.Expired(), asked)
	})
	t.Run("metadata", func(t *testing.T) {
		var asked []string
		ri := metadata.NewForConfigOrDie(env.Config).Resource(gvr)
		p := pager.New(compactingLister(t, ri.List, &asked), pager.Options{Limit: 10})
		var got []string
		for {
			l, err := p.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range l.Items {
				got = append(got, m.Namespace+"/"+m.Name)
			}
		}
		check(t, nil, got, keys, p.Expired(), asked)
	})
}

func check(t *testing.T, err error, got, want []string, expired int64, asked []string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %d objects %v…, want each of the %d once, in order", len(got), got[:min(len(got), 12)], len(want))
	}
	// Pages 2 to 10: each token expired once, and was replaced by the 410's.
	if expired != 9 {
		t.Errorf("expired tokens followed = %d, want 9", expired)
	}
	if n := slices.Index(asked[1:], ""); n >= 0 {
		t.Errorf("the list started again from the beginning (request %d of %v)", n+2, asked)
	}
}

func ptr[T any](v T) *T { return &v }
