package preview

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestPreviewReadAndUpdateMatchServer checks the two paths a dry-run create does not cover,
// against the real API server: reading an object in another version (conversion strategy
// None: what a GET at that version returns after a real create), and updates (a dry-run PUT
// over a stored object: status kept by the status subresource, transition rules with oldSelf,
// ratcheting).
func TestPreviewReadAndUpdateMatchServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv := newServer(t)
	agree, total := 0, 0
	for fi, file := range []string{"widget.yaml", "crontab.yaml", "gadget.yaml"} {
		for _, crd := range readCRDFile(t, filepath.Join("..", "testdata", "crds", file)) {
			crd = forServer(crd)
			if _, err := env.CreateCRD(ctx, crd.DeepCopy()); err != nil {
				t.Fatalf("installing %s: %v", crd.Name, err)
			}
			p, err := NewPreviewer(crd)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewSource(int64(1000 + fi)))
			for _, ver := range crd.Spec.Versions {
				if !ver.Served {
					continue
				}
				s, _ := p.usable(ver.Name)
				gen := &objectGenerator{r: r, mutate: 0.05}
				created := 0
				for i := 0; i < 200 && created < 25; i++ {
					ns := ""
					if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
						ns = "default"
					}
					name := fmt.Sprintf("ru-%s-%d", ver.Name, i)
					obj := gen.generate(s, crd.Spec.Group+"/"+ver.Name, crd.Spec.Names.Kind, name, ns)
					// finalizers would keep the object (and the CRD) from being deleted: no controller here
					unstructured.RemoveNestedField(obj, "metadata", "finalizers")
					body, _ := json.Marshal(obj)
					res, err := srv.do(ctx, srv.rc.Post().AbsPath(resourcePath(crd, ver.Name, "default")).SetHeader("Content-Type", "application/json").Body(body))
					if err != nil {
						t.Fatal(err)
					}
					if res.verdict != Accepted {
						continue
					}
					created++
					stored, _ := json.Marshal(res.object)

					// Read at every served version.
					for _, other := range crd.Spec.Versions {
						if !other.Served {
							continue
						}
						got, err := srv.do(ctx, srv.rc.Get().AbsPath(resourcePath(crd, other.Name, "default"), name))
						if err != nil || got.verdict != Accepted {
							t.Fatalf("GET %s at %s: %v %v", name, other.Name, err, got)
						}
						pr, err := p.Create(ctx, body, PreviewOptions{ReadVersion: other.Name})
						if err != nil {
							t.Fatalf("preview: %v", err)
						}
						got.warnings = pr.Warnings // a GET has its own warnings; compare objects and verdicts
						total++
						if diff := compare(pr, got); diff != "" {
							t.Errorf("%s: %s written at %s, read at %s: preview and API server disagree:\n%s\nobject: %s", crd.Name, name, ver.Name, other.Name, diff, body)
						} else {
							agree++
						}
					}

					// Update with another generated object of the same name.
					next := gen.generate(s, crd.Spec.Group+"/"+ver.Name, crd.Spec.Names.Kind, name, ns)
					if r.Intn(2) == 0 {
						// keep the immutable field the same half the time
						if v, ok, _ := unstructured.NestedFieldCopy(res.object, "spec", "immutableID"); ok {
							_ = unstructured.SetNestedField(next, v, "spec", "immutableID")
						}
					}
					rv, _, _ := unstructured.NestedString(res.object, "metadata", "resourceVersion")
					_ = unstructured.SetNestedField(next, rv, "metadata", "resourceVersion")
					nextBody, _ := json.Marshal(next)
					for _, fv := range []FieldValidation{FieldValidationWarn, FieldValidationStrict, FieldValidationIgnore} {
						sr, err := srv.do(ctx, srv.rc.Put().AbsPath(resourcePath(crd, ver.Name, "default"), name).Param("dryRun", "All").
							Param("fieldValidation", string(fv)).SetHeader("Content-Type", "application/json").Body(nextBody))
						if err != nil {
							t.Fatal(err)
						}
						pr, err := p.Update(ctx, nextBody, stored, PreviewOptions{FieldValidation: fv})
						if err != nil {
							t.Fatalf("preview update: %v", err)
						}
						total++
						if diff := compare(pr, sr); diff != "" {
							t.Errorf("%s: update of %s (%s, %s): preview and API server disagree:\n%s\nold: %s\nnew: %s", crd.Name, name, ver.Name, fv, diff, stored, nextBody)
						} else {
							agree++
						}
					}
					if _, err := srv.do(ctx, srv.rc.Delete().AbsPath(resourcePath(crd, ver.Name, "default"), name)); err != nil {
						t.Fatal(err)
					}
				}
				if created == 0 {
					t.Errorf("%s %s: no generated object was accepted", crd.Name, ver.Name)
				}
			}
			if err := env.DeleteCRD(ctx, crd.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("reads at other versions and updates: preview agreed with the API server on %d of %d", agree, total)
}
