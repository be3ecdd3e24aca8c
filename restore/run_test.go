package restore

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
)

// The tests of Run at its API, on a real kube-apiserver and etcd (one for the package).

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env, testenv.Options{}) }

const runNS = "default"

type restoreFx struct {
	group  string
	c      *migrate.Clients
	dyn    dynamic.Interface
	backup string
}

// newRestoreFx is the cluster after an upgrade that dropped spec.legacy with consent (the
// backup holds it, at v1beta1, which no live CRD serves), and a later release that holds
// spec.legacy again in widgets but not in gadgets:
//
//   - w-lost lost spec.legacy: restorable;
//   - w-same is as backed up;
//   - w-changed's spec.size changed since the backup: a conflict;
//   - w-deleted was deleted since the backup;
//   - g-lost lost spec.legacy, which no served version of gadgets holds.
func newRestoreFx(t *testing.T, name string) *restoreFx {
	t.Helper()
	ctx := context.Background()
	group := name + ".restore.example.com"
	f := &restoreFx{group: group, dyn: dynamic.NewForConfigOrDie(env.Config), backup: filepath.Join(t.TempDir(), "backup.yaml")}
	size := apiextensionsv1.JSONSchemaProps{Type: "integer"}
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{
		testcrd.New(group, "Widget", testcrd.Versions("v1"), testcrd.Storage("v1"), testcrd.Spec(map[string]apiextensionsv1.JSONSchemaProps{"size": size, "legacy": {Type: "string"}})),
		testcrd.New(group, "Gadget", testcrd.Versions("v1"), testcrd.Storage("v1"), testcrd.Spec(map[string]apiextensionsv1.JSONSchemaProps{"size": size})),
	} {
		env.CreateCRDForTest(t, crd)
	}
	var err error
	if f.c, err = migrate.NewClients(env.Config); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		plural, kind, name string
		spec               map[string]any
	}{
		{"widgets", "Widget", "w-lost", map[string]any{"size": int64(1)}},
		{"widgets", "Widget", "w-same", map[string]any{"size": int64(2), "legacy": "same"}},
		{"widgets", "Widget", "w-changed", map[string]any{"size": int64(9), "legacy": "c"}},
		{"gadgets", "Gadget", "g-lost", map[string]any{"size": int64(4)}},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": o.kind,
			"metadata": map[string]any{"name": o.name, "namespace": runNS}, "spec": o.spec}}
		if _, err := f.res(o.plural).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	doc := func(kind, name, spec string) string {
		return fmt.Sprintf("apiVersion: %s/v1beta1\nkind: %s\nmetadata:\n  name: %s\n  namespace: %s\n  uid: 00000000-0000-0000-0000-000000000000\n  resourceVersion: \"1\"\nspec:\n%s", group, kind, name, runNS, spec)
	}
	backup := strings.Join([]string{
		doc("Widget", "w-lost", "  size: 1\n  legacy: keep-me\n"),
		doc("Widget", "w-same", "  size: 2\n  legacy: same\n"),
		doc("Widget", "w-changed", "  size: 3\n  legacy: c\n"),
		doc("Widget", "w-deleted", "  size: 5\n  legacy: gone\n"),
		doc("Gadget", "g-lost", "  size: 4\n  legacy: nowhere\n"),
	}, "---\n")
	if err := os.WriteFile(f.backup, []byte(backup), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *restoreFx) res(plural string) dynamic.ResourceInterface {
	return f.dyn.Resource(schema.GroupVersionResource{Group: f.group, Version: "v1", Resource: plural}).Namespace(runNS)
}

// state is each object's spec (absent: nil) and resourceVersion.
func (f *restoreFx) state(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, plural := range []string{"widgets", "gadgets"} {
		list, err := f.res(plural).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			out[o.GetName()] = fmt.Sprintf("%v@%s", o.Object["spec"], o.GetResourceVersion())
		}
	}
	return out
}

func (f *restoreFx) spec(t *testing.T, plural, name string) map[string]any {
	t.Helper()
	o, err := f.res(plural).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, _, _ := unstructured.NestedMap(o.Object, "spec")
	return s
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		// states by object name; restored, conflicts, overwritten and notHeld by object name
		states                       map[string]string
		restored, conflicts, notHeld map[string][]string
		overwritten                  map[string][]string
		incomplete                   int
		// after: the live spec of widgets after the run (nil: nothing written)
		after map[string]map[string]any
	}{
		{
			name:      "dry run",
			o:         Options{DryRun: true},
			states:    map[string]string{"w-lost": StateRestored, "w-same": StateUnchanged, "w-changed": StateConflict, "w-deleted": StateMissing, "g-lost": StateNotHeld},
			restored:  map[string][]string{"w-lost": {"spec.legacy"}},
			conflicts: map[string][]string{"w-changed": {"spec.size"}},
			notHeld:   map[string][]string{"g-lost": {"spec.legacy"}},
			// conflict, missing, not held
			incomplete: 3,
		},
		{
			name:       "restore",
			states:     map[string]string{"w-lost": StateRestored, "w-same": StateUnchanged, "w-changed": StateConflict, "w-deleted": StateMissing, "g-lost": StateNotHeld},
			restored:   map[string][]string{"w-lost": {"spec.legacy"}},
			conflicts:  map[string][]string{"w-changed": {"spec.size"}},
			notHeld:    map[string][]string{"g-lost": {"spec.legacy"}},
			incomplete: 3,
			after: map[string]map[string]any{
				"w-lost":    {"size": int64(1), "legacy": "keep-me"},
				"w-changed": {"size": int64(9), "legacy": "c"},
			},
		},
		{
			name:     "force and recreate",
			o:        Options{Force: true, Recreate: true},
			states:   map[string]string{"w-lost": StateRestored, "w-same": StateUnchanged, "w-changed": StateRestored, "w-deleted": StateRecreated, "g-lost": StateNotHeld},
			restored: map[string][]string{"w-lost": {"spec.legacy"}},
			// Conflicts lists the differing fields with Force too (Overwritten: those written).
			conflicts:   map[string][]string{"w-changed": {"spec.size"}},
			overwritten: map[string][]string{"w-changed": {"spec.size"}},
			notHeld:     map[string][]string{"g-lost": {"spec.legacy"}},
			incomplete:  1,
			after: map[string]map[string]any{
				"w-lost":    {"size": int64(1), "legacy": "keep-me"},
				"w-changed": {"size": int64(3), "legacy": "c"},
				"w-deleted": {"size": int64(5), "legacy": "gone"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRestoreFx(t, strings.ReplaceAll(tc.name, " ", "-"))
			before := f.state(t)
			o := tc.o
			o.Files = []string{f.backup}
			confirmed := false
			o.Confirm = func(*Report) (bool, error) { confirmed = true; return true, nil }
			rep, err := Run(context.Background(), f.c, o)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if confirmed == tc.o.DryRun {
				t.Errorf("Confirm asked: %v, dry run %v", confirmed, tc.o.DryRun)
			}
			if rep.DryRun != tc.o.DryRun {
				t.Errorf("report dry run %v", rep.DryRun)
			}
			got := map[string]string{}
			for _, out := range rep.Objects {
				got[out.Name] = out.State
				for _, c := range []struct {
					what string
					got  []string
					want map[string][]string
				}{{"restored", out.Restored, tc.restored}, {"conflicts", out.Conflicts, tc.conflicts}, {"overwritten", out.Overwritten, tc.overwritten}, {"notHeld", out.NotHeld, tc.notHeld}} {
					if out.State == StateRecreated && c.what == "restored" {
						continue // all of them
					}
					if !slices.Equal(c.got, c.want[out.Name]) && len(c.got)+len(c.want[out.Name]) > 0 {
						t.Errorf("%s %s: %v, want %v", out.Name, c.what, c.got, c.want[out.Name])
					}
				}
				if out.State == StateNotHeld && !strings.Contains(out.Reason, "spec.legacy") {
					t.Errorf("%s: reason %q does not name the field", out.Name, out.Reason)
				}
			}
			if len(got) != len(tc.states) {
				t.Errorf("states %v, want %v", got, tc.states)
			}
			for name, want := range tc.states {
				if got[name] != want {
					t.Errorf("%s: %q, want %q", name, got[name], want)
				}
			}
			if n := rep.Incomplete(); n != tc.incomplete {
				t.Errorf("incomplete %d, want %d", n, tc.incomplete)
			}
			if tc.after == nil {
				if after := f.state(t); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("the dry run wrote:\nbefore %v\nafter  %v", before, after)
				}
				return
			}
			for name, want := range tc.after {
				if s := f.spec(t, "widgets", name); fmt.Sprint(s) != fmt.Sprint(want) {
					t.Errorf("%s: spec %v, want %v", name, s, want)
				}
			}
			if s := f.spec(t, "gadgets", "g-lost"); s["legacy"] != nil {
				t.Errorf("g-lost holds spec.legacy: %v", s)
			}
			if _, ok := tc.after["w-deleted"]; !ok {
				if _, err := f.res("widgets").Get(context.Background(), "w-deleted", metav1.GetOptions{}); err == nil {
					t.Errorf("w-deleted was re-created without Recreate")
				}
			}
		})
	}
}

// Confirm saying no: nothing written, ErrNotConfirmed.
func TestRunNotConfirmed(t *testing.T) {
	f := newRestoreFx(t, "no")
	before := f.state(t)
	rep, err := Run(context.Background(), f.c, Options{Files: []string{f.backup}, Confirm: func(*Report) (bool, error) { return false, nil }})
	if err != ErrNotConfirmed {
		t.Fatalf("Run: %v, want ErrNotConfirmed", err)
	}
	if rep == nil || rep.Counts[StateRestored] != 1 {
		t.Errorf("the dry-run pass's report: %+v", rep)
	}
	if after := f.state(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("not confirmed, and written:\nbefore %v\nafter  %v", before, after)
	}
}

// requestLog records the requests on one object's path: "GET 200", "PATCH dry 200", "PATCH 409".
type requestLog struct {
	rt   http.RoundTripper
	path string
	mu   sync.Mutex
	seen []string
}

func (l *requestLog) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := l.rt.RoundTrip(r)
	if strings.HasSuffix(r.URL.Path, l.path) {
		s := r.Method
		if r.URL.Query().Get("dryRun") != "" {
			s += " dry"
		}
		if res != nil {
			s += " " + strconv.Itoa(res.StatusCode)
		}
		l.mu.Lock()
		l.seen = append(l.seen, s)
		l.mu.Unlock()
	}
	return res, err
}

// loggedClients are clients of env whose requests on the path ending in path are recorded in
// the log returned.
func loggedClients(t *testing.T, path string) (*migrate.Clients, *requestLog) {
	t.Helper()
	log := &requestLog{path: path}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { log.rt = rt; return log })
	c, err := migrate.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, log
}

// TestRunSendsTheCheckedWrite: the write pass sends the write the dry-run pass checked (a
// restored object costs a GET, a dry-run PATCH and a PATCH), and reads, compares and dry-runs
// again an object changed since (its checked patch refused with 409) or whose CRD changed.
func TestRunSendsTheCheckedWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		// between the passes (Confirm)
		between func(t *testing.T, f *restoreFx)
		want    string
	}{
		{"unchanged", func(*testing.T, *restoreFx) {}, "GET 200, PATCH dry 200, PATCH 200"},
		{"object changed", func(t *testing.T, f *restoreFx) {
			if _, err := f.res("widgets").Patch(context.Background(), "w-lost", types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "GET 200, PATCH dry 200, PATCH 409, GET 200, PATCH dry 200, PATCH 200"},
		{"CRD changed", func(t *testing.T, f *restoreFx) {
			c := f.c.CRDs.ApiextensionsV1().CustomResourceDefinitions()
			if _, err := c.Patch(context.Background(), "widgets."+f.group, types.MergePatchType, []byte(`{"metadata":{"annotations":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "GET 200, PATCH dry 200, GET 200, PATCH dry 200, PATCH 200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRestoreFx(t, "checked-"+strings.ReplaceAll(strings.ToLower(tc.name), " ", "-"))
			c, log := loggedClients(t, "/widgets/w-lost")
			rep, err := Run(context.Background(), c, Options{Files: []string{f.backup}, Confirm: func(*Report) (bool, error) {
				tc.between(t, f)
				return true, nil
			}})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := strings.Join(log.seen, ", "); got != tc.want {
				t.Errorf("requests on w-lost:\n%s\nwant\n%s", got, tc.want)
			}
			for _, o := range rep.Objects {
				if o.Name == "w-lost" && (o.State != StateRestored || !slices.Equal(o.Restored, []string{"spec.legacy"})) {
					t.Errorf("w-lost: %+v", o)
				}
			}
			if s := f.spec(t, "widgets", "w-lost"); fmt.Sprint(s) != fmt.Sprint(map[string]any{"size": int64(1), "legacy": "keep-me"}) {
				t.Errorf("w-lost: spec %v", s)
			}
		})
	}
}

// widgetsFx is n widgets w-000… without spec.legacy in a new CRD of group, and a backup
// that restores it: for each object in turn, one document per value of legacies ("first" gives
// spec.legacy first-<i>).
func widgetsFx(t *testing.T, group string, n int, legacies ...string) (*migrate.Clients, dynamic.ResourceInterface, string) {
	t.Helper()
	ctx := context.Background()
	crd := testcrd.New(group, "Widget", testcrd.Versions("v1"), testcrd.Storage("v1"),
		testcrd.Spec(map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}, "legacy": {Type: "string"}}))
	env.CreateCRDForTest(t, crd)
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	res := dynamic.NewForConfigOrDie(env.Config).Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace(runNS)
	var docs []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("w-%03d", i)
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": runNS}, "spec": map[string]any{"size": int64(i)}}}
		if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, v := range legacies {
			docs = append(docs, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  size: %d\n  legacy: %s-%d\n", group, name, runNS, i, v, i))
		}
	}
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	if err := os.WriteFile(backup, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return c, res, backup
}

// legacyOf is every widget's spec.legacy ("" for none), by name.
func legacyOf(t *testing.T, res dynamic.ResourceInterface) map[string]string {
	t.Helper()
	list, err := res.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range list.Items {
		out[o.GetName()], _, _ = unstructured.NestedString(o.Object, "spec", "legacy")
	}
	return out
}

// TestRunConcurrently: documents are restored several at once, yet each object's documents
// one after another in backup order, and the outcomes come in backup order. Each object has
// two documents restoring spec.legacy at different values: the first restores it and the
// second then finds it changed (a conflict), as a restore of one document at a time does.
func TestRunConcurrently(t *testing.T) {
	const objects = 40
	c, res, backup := widgetsFx(t, "concurrent.restore.example.com", objects, "first", "second")
	var want []string
	for i := 0; i < objects; i++ {
		want = append(want, fmt.Sprintf("w-%03d %s", i, StateRestored), fmt.Sprintf("w-%03d %s", i, StateConflict))
	}
	var each []string
	rep, err := Run(context.Background(), c, Options{Files: []string{backup}, Concurrency: 8, Each: func(pass *Report, o Outcome) error {
		if !pass.DryRun {
			each = append(each, o.Name+" "+o.State)
		}
		return nil
	}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := strings.Join(each, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("outcomes of the pass that writes, in the order given:\n%s\nwant (backup order)\n%s", got, strings.Join(want, "\n"))
	}
	if rep.Counts[StateRestored] != objects || rep.Counts[StateConflict] != objects {
		t.Errorf("counts %v, want %d restored and %d conflicts", rep.Counts, objects, objects)
	}
	got := legacyOf(t, res)
	for i := 0; i < objects; i++ {
		if name, want := fmt.Sprintf("w-%03d", i), fmt.Sprintf("first-%d", i); got[name] != want {
			t.Errorf("%s: spec.legacy %q, want the first document's %s", name, got[name], want)
		}
	}
}

// TestRunInterruptedConcurrently: Ctrl-C during the pass that writes, with writes in flight:
// the run stops with the context's error, before the end of the backup, and its report names
// exactly the objects the cluster now holds restored (a write in flight is finished and
// reported, a document not started is not written).
func TestRunInterruptedConcurrently(t *testing.T) {
	const objects = 100
	c, res, backup := widgetsFx(t, "interrupted.restore.example.com", objects, "first")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writing := false
	rep, err := Run(ctx, c, Options{Files: []string{backup}, Concurrency: 8,
		Confirm: func(*Report) (bool, error) { writing = true; return true, nil },
		OnObject: func(Outcome) {
			if writing {
				cancel()
			}
		}})
	if err == nil || ctx.Err() == nil {
		t.Fatalf("interrupted restore: err %v, want the context's", err)
	}
	if rep == nil || rep.DryRun {
		t.Fatalf("report %+v, want the pass that writes", rep)
	}
	var reported, held []string
	for _, o := range rep.Objects {
		if o.State == StateRestored {
			reported = append(reported, o.Name)
		}
	}
	for name, l := range legacyOf(t, res) {
		if l != "" {
			held = append(held, name)
		}
	}
	sort.Strings(held)
	if strings.Join(reported, " ") != strings.Join(held, " ") {
		t.Errorf("reported restored:\n%v\nholding spec.legacy in the cluster:\n%v", reported, held)
	}
	if len(held) == 0 || len(held) >= objects {
		t.Errorf("%d of %d objects restored: want the interruption to stop the run after the first and before the end", len(held), objects)
	}
}

// TestRunAdmissionChangedBetweenPasses: a ValidatingAdmissionPolicy added between the passes
// (while Confirm asks) refuses w-lost's restore. The write pass does not send the write the
// dry-run pass checked under the admission configuration of then: the cluster's webhooks,
// policies and bindings are not the same, so it reads, compares and dry-runs w-lost again
// first, which the policy refuses, and writes nothing to it; the report says why every write
// was checked again. (Sending the checked write, as while nothing changed, meets the policy
// only with the write itself.)
func TestRunAdmissionChangedBetweenPasses(t *testing.T) {
	ctx := context.Background()
	f := newRestoreFx(t, "admission-changed")
	c, log := loggedClients(t, "/widgets/w-lost")
	rule := admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{f.group}, APIVersions: []string{"*"}, Resources: []string{"widgets"}},
	}
	rep, err := Run(ctx, c, Options{Files: []string{f.backup}, Confirm: func(*Report) (bool, error) {
		env.DenyByPolicy(t, testenv.Denial{Name: "restore-admission-changed", Rule: rule, Message: "spec.legacy is frozen",
			Refuse: "object.metadata.name == 'w-lost' && has(object.spec.legacy)",
			Probe: func(ctx context.Context) error {
				_, err := f.res("widgets").Patch(ctx, "w-lost", types.MergePatchType, []byte(`{"spec":{"legacy":"probe"}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			}})
		return true, nil
	}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := strings.Join(log.seen, ", "), "GET 200, PATCH dry 200, GET 200, PATCH dry 422"; got != want {
		t.Errorf("requests on w-lost:\n%s\nwant\n%s", got, want)
	}
	for _, o := range rep.Objects {
		if o.Name == "w-lost" && (o.State != StateFailed || !strings.Contains(o.Reason, "spec.legacy is frozen")) {
			t.Errorf("w-lost: %+v; want failed, refused by the policy", o)
		}
	}
	if s := f.spec(t, "widgets", "w-lost"); fmt.Sprint(s) != fmt.Sprint(map[string]any{"size": int64(1)}) {
		t.Errorf("w-lost: spec %v, want it unchanged", s)
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "admission webhooks, policies or bindings changed") }) {
		t.Errorf("notes %q: want the admission change said", rep.Notes)
	}
}
