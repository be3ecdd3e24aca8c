package convert

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/kubeversion"
)

// releaseCRDs reads every CRD of a release directory of testdata/releases.
func releaseCRDs(t testing.TB, dir string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "releases", dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no CRDs (%v)", dir, err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd, err := crdinfo.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, crd)
	}
	return out
}

// copySamples copies a sample directory of testdata/releases into a temporary directory.
func copySamples(t *testing.T, dir string) (string, map[string]string) {
	t.Helper()
	src := filepath.Join("..", "testdata", "releases", dir)
	files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no samples (%v)", dir, err)
	}
	dst := t.TempDir()
	before := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, filepath.Base(f))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		before[filepath.Base(f)] = string(b)
	}
	return dst, before
}

func byBase(rep *WriteReport) map[string]FileResult {
	out := map[string]FileResult{}
	for _, f := range rep.Files {
		out[filepath.Base(f.Path)] = f
	}
	return out
}

func findingChecks(fs []Finding) map[string]bool {
	out := map[string]bool{}
	for _, f := range fs {
		out[f.Check+" "+f.Path] = true
	}
	return out
}

// Strimzi's own examples (0.48.0, v1beta2) through the 0.51.0 release's four CRDs to v1 in one
// run (conversion None, the API server's rule): the Kafka and the KafkaUser convert losslessly
// and are written with only their apiVersion line changed (the KafkaNodePools of the same file,
// a CRD not in the run, and the blank line after each separator, byte-identical); the
// MirrorMaker2 loses spec.clusters on the round trip and the KafkaConnect lacks what v1
// requires: neither file changes, even with --allow-data-loss (v1 rejects both).
func TestWriteStrimziRelease(t *testing.T) {
	crds := releaseCRDs(t, "strimzi/0.51.0")
	dir, before := copySamples(t, "strimzi/samples/examples-0.48.0")
	opts := WriteOptions{Options: Options{To: "v1"}, CRDs: crds, Files: []string{dir}, KubeVersion: kubeversion.Version{Major: 1, Minor: 34}}
	release, err := kubeversion.Use(opts.KubeVersion) // the run's version, chosen by the caller
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	rep, err := Write(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.KubeVersion != "1.34" || len(rep.Targets) != 4 || len(rep.Conversions) != 4 {
		t.Errorf("kube version %q, %d targets, %d conversion runs; want 1.34, 4, 4", rep.KubeVersion, len(rep.Targets), len(rep.Conversions))
	}
	files := byBase(rep)
	for _, name := range []string{"kafka-ephemeral.yaml", "kafka-user.yaml"} {
		if s := files[name].Status; s != FileWritten {
			t.Errorf("%s: %q, want %q: %+v", name, s, FileWritten, files[name].Objects)
		}
		got := readFile(t, filepath.Join(dir, name))
		want := before[name]
		for _, kind := range []string{"Kafka", "KafkaUser"} {
			want = strings.ReplaceAll(want, "apiVersion: kafka.strimzi.io/v1beta2\nkind: "+kind+"\n", "apiVersion: kafka.strimzi.io/v1\nkind: "+kind+"\n")
		}
		if got != want {
			t.Errorf("%s: only the Kafka/KafkaUser apiVersion lines should change:\n%s", name, unifiedDiff(name, []byte(want), []byte(got)))
		}
	}
	if !strings.Contains(readFile(t, filepath.Join(dir, "kafka-ephemeral.yaml")), "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaNodePool") {
		t.Error("the KafkaNodePools (no CRD of the run) were changed")
	}
	mm2 := files["kafka-mirror-maker-2.yaml"]
	if mm2.Status != FileNotProven || !findingChecks(mm2.Objects[0].Problems)[CheckRoundTrip+" .spec.clusters"] || !findingChecks(mm2.Objects[0].Problems)[CheckPruned+" .spec.clusters"] {
		t.Errorf("MirrorMaker2: %q %+v; want not proven, spec.clusters pruned and lost on the round trip", mm2.Status, mm2.Objects)
	}
	connect := files["kafka-connect.yaml"]
	if connect.Status != FileNotProven || !findingChecks(connect.Objects[0].Problems)[CheckTargetSchema+" .spec.groupId"] {
		t.Errorf("KafkaConnect: %q %+v; want not proven, spec.groupId required at v1", connect.Status, connect.Objects)
	}
	if rep.Converted != 2 || rep.Problems() != 2 || rep.Objects != 4 {
		t.Errorf("objects %d, converted %d, problems %d; want 4, 2, 2", rep.Objects, rep.Converted, rep.Problems())
	}
	for _, name := range []string{"kafka-mirror-maker-2.yaml", "kafka-connect.yaml"} {
		if readFile(t, filepath.Join(dir, name)) != before[name] {
			t.Errorf("%s was changed", name)
		}
	}
	// Consent to data loss does not make an object v1 rejects valid.
	opts.AllowDataLoss = true
	if rep, err = Write(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if mm2 := byBase(rep)["kafka-mirror-maker-2.yaml"]; mm2.Status != FileNotProven || len(mm2.Objects[0].Dropped) == 0 {
		t.Errorf("MirrorMaker2 with --allow-data-loss: %q, dropped %v; want not proven (v1 requires spec.target), the losses listed", mm2.Status, mm2.Objects[0].Dropped)
	}
	if readFile(t, filepath.Join(dir, "kafka-mirror-maker-2.yaml")) != before["kafka-mirror-maker-2.yaml"] {
		t.Error("kafka-mirror-maker-2.yaml was changed with --allow-data-loss")
	}
}

// A converted object the API server's create path rejects at the target version (an invalid
// metadata.name, which conversion and the schema never look at) is not written; the reason is
// the server's own error.
func TestWriteCreatePathRejects(t *testing.T) {
	crd := loadCRD(t, "crontab.yaml")
	const text = "apiVersion: stable.example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: Nightly_Backup\n  namespace: default\nspec:\n  cronSpec: \"0 3 * * *\"\n  image: backup:1.2\n"
	file := filepath.Join(t.TempDir(), "n.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Write(context.Background(), WriteOptions{Options: Options{CRD: crd, To: "v1"}, Files: []string{file}})
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Files[0]
	if f.Status != FileNotProven || len(f.Objects[0].Problems) != 1 {
		t.Fatalf("%q %+v; want not proven, one problem", f.Status, f.Objects)
	}
	p := f.Objects[0].Problems[0]
	if p.Check != CheckCreate || !strings.Contains(p.Detail, "metadata.name: Invalid value: \"Nightly_Backup\"") {
		t.Errorf("problem %+v; want the create path's metadata.name error", p)
	}
	if readFile(t, file) != text {
		t.Error("the file was changed")
	}
}

// --check over cert-manager's own test manifests with the v1.7.3 release's CRDs (no --to:
// each CRD's storage version, v1): every v1alpha2 and v1alpha3 object is listed as at a version
// the release removed; the v1 ones are at the target.
func TestCheckCertManagerRelease(t *testing.T) {
	crds := releaseCRDs(t, "cert-manager/v1.7.3")
	rep, err := Check(context.Background(), WriteOptions{CRDs: crds, Files: []string{filepath.Join("..", "testdata", "releases", "cert-manager", "samples")}})
	if err != nil {
		t.Fatal(err)
	}
	old := 0
	for _, f := range rep.Files {
		if f.Status != FileStillOld {
			t.Errorf("%s: %q", f.Path, f.Status)
		}
		for _, o := range f.Objects {
			old++
			if o.To != "v1" || o.Served != VersionRemoved || (o.From != "v1alpha2" && o.From != "v1alpha3") {
				t.Errorf("%s:%d %s %s: from %s (%s) to %s", f.Path, o.Line, o.Kind, o.Name, o.From, o.Served, o.To)
			}
		}
	}
	if old == 0 || rep.AtTarget == 0 || rep.Converted != old || rep.To != "" {
		t.Errorf("%d old, %d at target, converted %d, to %q", old, rep.AtTarget, rep.Converted, rep.To)
	}
}
