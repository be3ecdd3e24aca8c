// Package fleet checks kubectl crdver on a fleet of clusters against real API servers of two
// Kubernetes minors, through the built plugin: the fleet report agrees with the single run of
// each cluster row by row (its own Kubernetes version, its own webhooks), an unreachable
// cluster is a row, the exit code is the worst; the upgrade rolls through the clusters in
// waves, stops at the cluster that refuses, continues from the clusters' own state, and
// survives a SIGKILL of the fleet run.
package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/printers"
)

// The servers: two of the current minor and two of the older one CI builds, started at once
// and shared by every test of the package; plugin is the built kubectl-crdver.
var (
	servers map[string]*testenv.Env // by name: new-a, new-b (1.37), old-a, old-b (1.34)
	minors  = map[string]string{"new-a": "", "new-b": "", "old-a": olderMinor, "old-b": olderMinor}
	plugin  string
)

// olderMinor is the older Kubernetes minor whose kube-apiserver CI builds (Makefile's
// CI_KUBE_MINOR).
const olderMinor = "1.34"

func TestMain(m *testing.M) {
	check, err := testenv.IsolateCache()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	code := func() int {
		dir, err := os.MkdirTemp("", "crdver-fleet-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		servers = map[string]*testenv.Env{}
		for name, minor := range minors {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var e *testenv.Env
				var err error
				if minor == "" {
					e, err = testenv.Start(testenv.Options{})
				} else {
					e, err = testenv.StartBuiltMinorShared(minor)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
					return
				}
				servers[name] = e
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := testenv.BuildPlugin(filepath.Join(dir, "bin"), testenv.BuildOptions{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			plugin = p
		}()
		wg.Wait()
		defer func() {
			for _, e := range servers {
				e.Stop()
			}
		}()
		if len(errs) > 0 {
			fmt.Fprintln(os.Stderr, "testenv:", errs)
			return 1
		}
		return m.Run()
	}()
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		code = 1
	}
	os.Exit(code)
}

// engine is crdver-engine beside the built kubectl-crdver.
func engine() string { return filepath.Join(filepath.Dir(plugin), testenv.PluginEngine) }

// closedPort is an address nothing listens on.
func closedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// kubeconfigs writes one kubeconfig per cluster into a folder (as Cluster API writes them), the
// context of each named after it: clusters maps a name to a server; elsewhere maps a name to
// an address that is no API server (a closed port, a server that never answers), reached with
// a server's credentials. It returns the folder and a merged kubeconfig holding every context.
func kubeconfigs(t testing.TB, clusters map[string]*testenv.Env, elsewhere map[string]string) (dir, merged string) {
	t.Helper()
	dir = t.TempDir()
	all := clientcmdapi.NewConfig()
	add := func(name string, cfg *clientcmdapi.Config) {
		one := clientcmdapi.NewConfig()
		ctx := cfg.Contexts[cfg.CurrentContext]
		one.Clusters[name] = cfg.Clusters[ctx.Cluster]
		one.AuthInfos[name] = cfg.AuthInfos[ctx.AuthInfo]
		one.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "default"}
		one.CurrentContext = name
		if err := clientcmd.WriteToFile(*one, filepath.Join(dir, name+".kubeconfig")); err != nil {
			t.Fatal(err)
		}
		all.Clusters[name], all.AuthInfos[name], all.Contexts[name] = one.Clusters[name], one.AuthInfos[name], one.Contexts[name]
	}
	var template *clientcmdapi.Config
	for name, e := range clusters {
		cfg, err := clientcmd.LoadFromFile(e.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		template = cfg
		add(name, cfg)
	}
	for name, addr := range elsewhere {
		cfg := template.DeepCopy()
		cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server = "https://" + addr
		add(name, cfg)
	}
	merged = filepath.Join(t.TempDir(), "kubeconfig")
	all.CurrentContext = ""
	if err := clientcmd.WriteToFile(*all, merged); err != nil {
		t.Fatal(err)
	}
	return dir, merged
}

// newRunner is a user of the built plugin with a cache folder of its own (upgrade's
// checkpoints) and no KUBECONFIG but what env says.
func newRunner(t testing.TB, env ...string) *testenv.User {
	return testenv.NewUser(t, plugin, append([]string{"KUBECONFIG="}, env...)...)
}

// report reads a fleet report (-o json).
func report(t testing.TB, res testenv.Result) *fleet.Report {
	t.Helper()
	var rep fleet.Report
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("the fleet report (exit %d): %v\nstdout:\n%s\nstderr:\n%s", res.Code, err, res.Stdout, res.Stderr)
	}
	return &rep
}

// forPeople is what a fleet command run with -o json prints without it, as a terminal shows it:
// the waves (rollout: the --waves it was given, "" for another command) before the clusters
// run, the progress lines of its standard error, the report printed for people (as the plugin
// prints it), then its last line, the error.
func forPeople(t testing.TB, res testenv.Result, rep *fleet.Report, waves string) string {
	t.Helper()
	var b strings.Builder
	h := printers.Human{AllListed: "-o json", WideListed: "-o wide"}
	if waves != "" {
		if err := h.PrintPart(&b, printers.FleetWaves(rep, waves)); err != nil {
			t.Fatal(err)
		}
	}
	progress, last := res.Stderr, ""
	if i := strings.LastIndex("\n"+progress, "\nerror: "); i >= 0 {
		progress, last = progress[:i], progress[i:]
	}
	b.WriteString(progress)
	if err := h.PrintReport(&b, printers.Fleet(rep)); err != nil {
		t.Fatal(err)
	}
	b.WriteString(last)
	return b.String()
}

// clients are a server's clients.
type clients struct {
	crds apiextensionsclient.Interface
	dyn  dynamic.Interface
}

func clientsOf(t testing.TB, e *testenv.Env) clients {
	t.Helper()
	c, err := apiextensionsclient.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	return clients{crds: c, dyn: d}
}

// writeRelease writes crds as a release folder dir/name and returns it.
func writeRelease(t testing.TB, dir, name string, crds ...*apiextensionsv1.CustomResourceDefinition) string {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, c := range crds {
		y, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	if err := os.WriteFile(filepath.Join(d, "crds.yaml"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// install creates or replaces crd on e (spec only; status.storedVersions as the server keeps it).
func install(t testing.TB, e *testenv.Env, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ctx := context.Background()
	c := clientsOf(t, e)
	cur, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := e.CreateCRD(ctx, crd.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		return
	case err != nil:
		t.Fatal(err)
	}
	next := cur.DeepCopy()
	next.Spec = *crd.Spec.DeepCopy()
	if _, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.WaitEstablished(ctx, crd.Name); err != nil {
		t.Fatal(err)
	}
}

// create creates objects (their apiVersion says at which version).
func create(t testing.TB, e *testenv.Env, plural string, objs ...map[string]any) {
	t.Helper()
	c := clientsOf(t, e)
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o}
		gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
		if err != nil {
			t.Fatal(err)
		}
		gvr := gv.WithResource(plural)
		if _, err := c.dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
			t.Fatalf("creating %s %s on %s: %v", gvr, u.GetName(), e.Config.Host, err)
		}
	}
}

// waitNoProcess waits until no process's command line holds marker (the children of a fleet
// run killed with SIGKILL stop on the SIGTERM their parent's death sends them).
func waitNoProcess(t testing.TB, marker string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		found := ""
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && strings.Contains(string(b), marker) {
				found = e.Name()
			}
		}
		if found == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s (%s) still runs 30 s after its fleet run was killed", found, marker)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
