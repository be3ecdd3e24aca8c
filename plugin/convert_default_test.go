package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	sigsyaml "sigs.k8s.io/yaml"
)

// A default is not the user's data. Flux's own GitRepository sample (source-controller
// v0.21.2's config/samples, at v1beta1, with no spec.gitImplementation) goes to v1 with the
// source-controller v1.6.2 CRD in the cluster: v1beta1 defaults gitImplementation to "go-git"
// and v1 does not have the field, but the file never held it, so convert --write writes the
// file (only its apiVersion line changes) and names the dropped default as not a loss. (It
// once refused: "pruned-fields .spec.gitImplementation … (data loss)", "round-trip … lost:
// was "go-git"".) The API server agrees: the sample created at v1beta1 reads at v1 exactly as
// the written file does when created at v1, and neither has gitImplementation.
func TestConvertWriteDropsOnlyADefault(t *testing.T) {
	ctx := context.Background()
	installCRDFile(t, td("releases", "flux", "source-controller-v1.6.2", "source.toolkit.fluxcd.io_gitrepositories.yaml"))
	sample, err := os.ReadFile(td("releases", "flux", "samples", "source_v1beta1_gitrepository.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "gitrepository.yaml")
	if err := os.WriteFile(file, sample, 0o644); err != nil {
		t.Fatal(err)
	}
	got := runCluster(t, "convert", "--to", "v1", "-f", file, "--write")
	if got.code != 0 {
		t.Fatalf("exit %d, want 0\n%s%s", got.code, got.stdout, got.stderr)
	}
	mustContain(t, "stdout", got.stdout, "written", "v1 does not have .spec.gitImplementation, which the file does not set (only v1beta1's default put it there): not a loss")
	written, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(string(sample), "source.toolkit.fluxcd.io/v1beta1", "source.toolkit.fluxcd.io/v1", 1); string(written) != want {
		t.Fatalf("written:\n%s\nwant only the apiVersion changed:\n%s", written, want)
	}

	// The API server: the sample created at v1beta1 and read at v1, and the written file
	// created at v1 (a dry run), hold the same spec.
	dyn, err := dynamic.NewForConfig(quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	at := func(v string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: v, Resource: "gitrepositories"}).Namespace("default")
	}
	decode := func(b []byte) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatal(err)
		}
		return u
	}
	orig := decode(sample)
	if _, err := at("v1beta1").Create(ctx, orig, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = at("v1").Delete(context.Background(), orig.GetName(), metav1.DeleteOptions{}) })
	read, err := at("v1").Get(ctx, orig.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := decode(written)
	w.SetName(orig.GetName() + "-written")
	created, err := at("v1").Create(ctx, w, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("the API server refuses the written file at v1: %v", err)
	}
	if d := cmp.Diff(read.Object["spec"], created.Object["spec"]); d != "" {
		t.Errorf("spec read at v1 after a create at v1beta1 (-) and of the written file created at v1 (+):\n%s", d)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(read.Object, "spec", "gitImplementation"); found {
		t.Errorf("the API server's read at v1 has spec.gitImplementation: %v", read.Object["spec"])
	}
}
