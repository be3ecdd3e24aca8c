package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// olderMinor is the older kube-apiserver that CI builds (internal/versiondiff.CIOlderMinor).
const olderMinor = "1.34"

// probeCRD is the document of testdata/kube-versions/probes.yaml that defines name.
func probeCRD(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/kube-versions/probes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		if bytes.Contains(doc, []byte("name: "+name+"\n")) {
			return doc
		}
	}
	t.Fatalf("no %s in probes.yaml", name)
	return nil
}

// upgrade judges a release as the cluster's Kubernetes version, with the server's dry-run of
// the CRD apply, as plan does: against a real kube-apiserver 1.34, which rejects a CEL rule of
// the lists library (distinct(), admitted for new expressions from 1.35), `upgrade --dry-run`
// says the apply is rejected and exits 1, and `upgrade --yes` refuses before any write.
func TestUpgradeJudgesAsTheClusterVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver " + olderMinor)
	}
	old := testenv.StartBuiltMinor(t, olderMinor)
	work := t.TempDir()
	file := filepath.Join(work, "distinct.yaml")
	if err := os.WriteFile(file, probeCRD(t, "distinctprobes.probes.crdver.io"), 0o644); err != nil {
		t.Fatal(err)
	}
	runOld := func(args ...string) result {
		return run(t, "", append(args, "--kubeconfig", old.Kubeconfig)...)
	}

	p := runOld("plan", "-f", file)
	if p.code != ExitProblems || !strings.Contains(p.stdout, "undeclared reference") {
		t.Fatalf("plan: exit %d, want 1 with the server's rejection\n%s%s", p.code, p.stdout, p.stderr)
	}
	d := runOld("upgrade", "-f", file, "--dry-run")
	t.Logf("upgrade --dry-run: exit %d\n%s%s", d.code, d.stdout, d.stderr)
	if d.code != ExitProblems || !strings.Contains(d.stdout, "undeclared reference") {
		t.Errorf("upgrade --dry-run: exit %d, want 1 naming the server's rejection (undeclared reference)", d.code)
	}
	// The JSON report says how it was judged: as 1.34, by the server's dry-run.
	j := runOld("upgrade", "-f", file, "--dry-run", "-o", "json")
	var rep upgrade.Report
	if err := json.Unmarshal([]byte(j.stdout), &rep); err != nil || rep.Plan == nil || len(rep.Plan.Items) != 1 {
		t.Fatalf("upgrade --dry-run -o json: %v\n%s", err, j.stdout)
	}
	if rep.Plan.KubernetesVersion != olderMinor || rep.Plan.Items[0].ApplyVerdictSource != plan.VerdictServerDryRun || rep.Plan.Items[0].Apply.Allowed {
		t.Errorf("plan judged as %q, apply verdict from %q, allowed %v; want %s, %s, false", rep.Plan.KubernetesVersion, rep.Plan.Items[0].ApplyVerdictSource, rep.Plan.Items[0].Apply.Allowed, olderMinor, plan.VerdictServerDryRun)
	}
	y := runOld("upgrade", "-f", file, "--yes", "--backup", filepath.Join(work, "backup.yaml"), "--checkpoint", filepath.Join(work, "cp.json"))
	t.Logf("upgrade --yes: exit %d\n%s%s", y.code, y.stdout, y.stderr)
	if y.code != ExitProblems {
		t.Errorf("upgrade --yes: exit %d, want 1 (refused before any write)", y.code)
	}
	cs := apiextensionsclient.NewForConfigOrDie(old.Config)
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "distinctprobes.probes.crdver.io", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("upgrade --yes wrote the CRD (get: %v)", err)
	}
	// --kube-version 1.37 judges as that version: the rule is accepted offline.
	k := runOld("upgrade", "-f", file, "--dry-run", "--kube-version", "1.37", "-o", "json")
	if strings.Contains(k.stdout, "undeclared reference") {
		t.Errorf("upgrade --dry-run --kube-version 1.37 still rejects distinct():\n%s", k.stdout)
	}
}
