package preview

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// TestPreviewUpdateRatchetingMatchesServer stores objects under a loose schema, tightens the
// schema, then previews updates: an invalid value left unchanged ratchets (accepted), a
// changed invalid value is rejected — by OpenAPI and by CEL rules. Every verdict is compared
// with a dry-run PUT on the API server.
func TestPreviewUpdateRatchetingMatchesServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	loose := testenv.LoadCRD(t, "fixtures/ratchets-loose.yaml")
	tight := testenv.LoadCRD(t, "fixtures/ratchets-tight.yaml")
	if _, err := env.CreateCRD(ctx, forServer(loose)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.DeleteCRD(context.Background(), loose.Name) }()
	srv := newServer(t)
	created, err := srv.do(ctx, srv.rc.Post().AbsPath(resourcePath(loose, "v1", "default")).SetHeader("Content-Type", "application/json").
		Body([]byte(`{"apiVersion":"preview.example.com/v1","kind":"Ratchet","metadata":{"name":"r1"},"spec":{"code":"toolong","level":50,"other":"a"}}`)))
	if err != nil || created.verdict != Accepted {
		t.Fatalf("creating r1: %v %+v", err, created)
	}
	// Tighten the schema in place.
	c, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, loose.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Versions = tight.Spec.Versions
	if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := NewPreviewer(tight)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := json.Marshal(created.object)
	rv, _, _ := unstructured.NestedString(created.object, "metadata", "resourceVersion")
	cases := []struct {
		name, spec, want string
	}{
		{"invalid values unchanged ratchet", `{"code":"toolong","level":50,"other":"b"}`, Accepted},
		{"changed code still too long", `{"code":"toolong2","level":50,"other":"a"}`, Rejected},
		{"changed level still above 10", `{"code":"toolong","level":60,"other":"a"}`, Rejected},
		{"transition rule: level goes down", `{"code":"ok","level":5,"other":"a"}`, Rejected},
		{"fixed values", `{"code":"ok","level":50,"other":"a"}`, Accepted},
	}
	// Wait until the API server serves the tightened schema: a changed invalid value is rejected.
	probe := []byte(`{"apiVersion":"preview.example.com/v1","kind":"Ratchet","metadata":{"name":"r1","namespace":"default","resourceVersion":"` + rv + `"},"spec":{"code":"toolong2","level":50}}`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		sr, err := srv.do(ctx, srv.rc.Put().AbsPath(resourcePath(tight, "v1", "default"), "r1").Param("dryRun", "All").
			SetHeader("Content-Type", "application/json").Body(probe))
		if err != nil {
			t.Fatal(err)
		}
		if sr.verdict == Rejected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the API server did not start serving the tightened schema within 30s")
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(`{"apiVersion":"preview.example.com/v1","kind":"Ratchet","metadata":{"name":"r1","namespace":"default","resourceVersion":"` + rv + `"},"spec":` + tc.spec + `}`)
			sr, err := srv.do(ctx, srv.rc.Put().AbsPath(resourcePath(tight, "v1", "default"), "r1").Param("dryRun", "All").
				SetHeader("Content-Type", "application/json").Body(body))
			if err != nil {
				t.Fatal(err)
			}
			pr, err := p.Update(ctx, body, old, PreviewOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pr.Verdict != tc.want {
				t.Errorf("preview verdict %s, want %s (errors %v)", pr.Verdict, tc.want, pr.Errors)
			}
			if diff := compare(pr, sr); diff != "" {
				t.Errorf("preview and API server disagree:\n%s", diff)
			}
		})
	}
}
