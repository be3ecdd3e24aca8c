package plugin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serverDryRuns is the API server's own count of dry-run PUTs of group's objects
// (apiserver_request_total with dry_run="All"), read from its /metrics.
func serverDryRuns(t *testing.T, group string) float64 {
	t.Helper()
	raw, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `dry_run="All"`) ||
			!strings.Contains(line, `group="`+group+`"`) || !strings.Contains(line, `verb="PUT"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		n += v
	}
	return n
}

// guardGadgets installs an unbound ValidatingAdmissionPolicy (it refuses nothing) matching
// updates of the fixture's gadgets: the preflight cannot prove its dry runs needless.
func guardGadgets(t *testing.T, group string) {
	t.Helper()
	vap := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": "guard-" + group},
		"spec": map[string]any{
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{group}, "apiVersions": []any{"*"}, "resources": []any{"gadgets"}, "operations": []any{"UPDATE"},
			}}},
			"validations": []any{map[string]any{"expression": "true"}},
		},
	}}
	res := dynamic.NewForConfigOrDie(env.Config).Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"})
	if _, err := res.Create(context.Background(), vap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Delete(context.Background(), "guard-"+group, metav1.DeleteOptions{}) })
}

// migrateJSON is the part of migrate's -o json these tests read.
type migrateJSON struct {
	Preflight struct {
		Objects   int64    `json:"objects"`
		DryRuns   int64    `json:"dryRuns"`
		NotNeeded []string `json:"notNeeded"`
	} `json:"preflight"`
	Result struct {
		Resumed bool `json:"resumed"`
	} `json:"result"`
}

// A migrate resumed after Ctrl-C in the rewrite does not redo the preflight it completed: the
// objects the interrupted rewrite wrote are not checked again, and of the others only those
// changed since are dry-run again (none here). The API server's own request count agrees
// with the report.
func TestMigrateResumeKeepsPreflight(t *testing.T) {
	name, group, _ := migrateFixture(t, "pfresume", 60)
	guardGadgets(t, group)
	cp := filepath.Join(t.TempDir(), "cp.json")

	before := serverDryRuns(t, group)
	out, errOut, err := interruptAfterAPage(t, name, cp, "--quiet")
	if code := ExitCode(err); code != ExitUnavailable {
		t.Fatalf("interrupted run: exit %d (%v), want 3:\n%s%s", code, err, out, errOut)
	}
	first := serverDryRuns(t, group) - before
	if first != 60 {
		t.Fatalf("the first run's preflight sent %v dry runs, want 60", first)
	}

	before = serverDryRuns(t, group)
	r := runCluster(t, "migrate", name, "--yes", "--quiet", "--checkpoint", cp, "-o", "json")
	if r.code != 0 {
		t.Fatalf("resumed run: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rep migrateJSON
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	seen := serverDryRuns(t, group) - before
	notNeeded := strings.Join(rep.Preflight.NotNeeded, "\n")
	if !rep.Result.Resumed || seen != float64(rep.Preflight.DryRuns) || rep.Preflight.DryRuns > 2*5 || rep.Preflight.Objects == 0 ||
		!strings.Contains(notNeeded, "the interrupted rewrite wrote them already") || !strings.Contains(notNeeded, "an earlier preflight found them accepted") {
		t.Errorf("resumed run: resumed %v, %d dry runs reported, %v seen by the API server (want at most the unfinished pages' 10), %d objects checked; not needed:\n%s",
			rep.Result.Resumed, rep.Preflight.DryRuns, seen, rep.Preflight.Objects, notNeeded)
	}
	stored, _ := storedAt(t, group)
	if len(stored) != 1 || stored[group+"/v1"] != 60 {
		t.Errorf("etcd after the resumed run = %v, want all 60 at v1", stored)
	}
}

// A migrate to the version already stored, with nothing pending (status.storedVersions is
// just that version), sends no dry run: the API server counts none.
func TestMigrateNothingPendingNoDryRuns(t *testing.T) {
	name, group, _ := migrateFixture(t, "pfdone", 10)
	guardGadgets(t, group)
	before := serverDryRuns(t, group)
	r := runCluster(t, "migrate", name, "--to", "v1beta1", "--yes", "--quiet", "--checkpoint", filepath.Join(t.TempDir(), "cp.json"), "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rep migrateJSON
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if seen := serverDryRuns(t, group) - before; seen != 0 || rep.Preflight.DryRuns != 0 || !strings.Contains(strings.Join(rep.Preflight.NotNeeded, "\n"), "nothing is pending") {
		t.Errorf("nothing pending: %v dry runs seen by the API server, %d reported; not needed %q", seen, rep.Preflight.DryRuns, rep.Preflight.NotNeeded)
	}
	// The same with the objects stored at another version too: every object is dry-run.
	r = runCluster(t, "migrate", name, "--to", "v1", "--yes", "--quiet", "--checkpoint", filepath.Join(t.TempDir(), "cp2.json"), "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if seen := serverDryRuns(t, group) - before; seen != 10 {
		t.Errorf("a pending migration: %v dry runs seen by the API server, want 10", seen)
	}
}
