package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	sigsyaml "sigs.k8s.io/yaml"
)

// convert -f DIR --to v1 --write with no CRD named, against the real API server holding
// Strimzi 0.51.0's four CRDs: the cluster's CRDs are the release; the Kafka and the KafkaUser of
// Strimzi's 0.48.0 examples are written at v1, judged as the cluster's Kubernetes version, and
// the API server accepts both (server-side dry-run create at v1); the MirrorMaker2 and the
// KafkaConnect files stay as they were (exit 1).
func TestConvertWriteReleaseFromCluster(t *testing.T) {
	for _, f := range []string{"040-Crd-kafka.yaml", "041-Crd-kafkaconnect.yaml", "044-Crd-kafkauser.yaml", "048-Crd-kafkamirrormaker2.yaml"} {
		installCRDFile(t, td("releases", "strimzi", "0.51.0", f))
	}
	src := td("releases", "strimzi", "samples", "examples-0.48.0")
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
	if err != nil || len(files) != 4 {
		t.Fatalf("%d sample files: %v", len(files), err)
	}
	before := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		before[filepath.Base(f)] = string(b)
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := runCluster(t, "convert", "--to", "v1", "-f", dir, "--write")
	if got.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", got.code, got.stdout, got.stderr)
	}
	mustContain(t, "stdout", got.stdout, "kafka-user.yaml", "written", "kafka-mirror-maker-2.yaml", "not converted: not proven")
	mustContain(t, "stderr", got.stderr, "the cluster's version", "2 file(s) not converted")
	for _, name := range []string{"kafka-connect.yaml", "kafka-mirror-maker-2.yaml"} {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != before[name] {
			t.Errorf("%s was changed", name)
		}
	}
	dyn, err := dynamic.NewForConfig(quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range []string{"kafka-ephemeral.yaml", "kafka-user.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var m map[string]any
			if err := sigsyaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: m}
			if u.GetKind() != "Kafka" && u.GetKind() != "KafkaUser" {
				continue
			}
			if u.GetAPIVersion() != "kafka.strimzi.io/v1" {
				t.Errorf("%s %s: apiVersion %s after --write", u.GetKind(), u.GetName(), u.GetAPIVersion())
			}
			res := map[string]string{"Kafka": "kafkas", "KafkaUser": "kafkausers"}[u.GetKind()]
			gvr := schema.GroupVersionResource{Group: "kafka.strimzi.io", Version: "v1", Resource: res}
			if _, err := dyn.Resource(gvr).Namespace("default").Create(context.Background(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
				t.Errorf("%s %s: the API server rejects what --write wrote: %v", u.GetKind(), u.GetName(), err)
			}
			checked++
		}
	}
	if checked != 2 {
		t.Errorf("%d converted objects checked, want 2", checked)
	}
}

// --kube-version judges the objects --write converts: with any other mode it is a usage error.
func TestConvertKubeVersionNeedsWrite(t *testing.T) {
	got := run(t, "", "convert", "--crd-file", td("crds", "crontab.yaml"), "--to", "v1", "-f", td("convert", "crontabs-v1beta1.yaml"), "--kube-version", "1.34")
	if got.code != 2 {
		t.Fatalf("exit %d, want 2\n%s", got.code, got.stderr)
	}
	mustContain(t, "stderr", got.stderr, "--kube-version goes with --write")
}
