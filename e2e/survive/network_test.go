package survive

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// createMany adds n more objects (prefix-<i>, no spec.legacy) at v1alpha1, 16 at a time.
func (c *cluster) createMany(t *testing.T, prefix string, n int) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: c.group, Version: "v1alpha1", Resource: "gadgets"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("%s-%05d", prefix, i)
				u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": c.group + "/v1alpha1", "kind": "Gadget",
					"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{"size": int64(i)}}}
				_, err := c.dyn.Resource(gvr).Namespace("default").Create(context.Background(), u, metav1.CreateOptions{FieldManager: "kubectl-create"})
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// proxyTo starts a proxy in front of env (closed when the test ends) and writes env's
// kubeconfig pointed at it.
func proxyTo(t *testing.T, env *testenv.Env, opts ...testenv.ProxyOption) (*testenv.Proxy, string) {
	t.Helper()
	proxy, err := testenv.StartProxy(env, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	kc, err := proxy.Kubeconfig(env, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return proxy, kc
}

// storedAt checks that etcd holds every object of the CRD at version v.
func (c *cluster) storedAt(t *testing.T, v string) {
	t.Helper()
	got, _, err := c.env.StoredAPIVersions(context.Background(), c.group, "gadgets")
	if err != nil {
		t.Fatal(err)
	}
	for apiVersion, n := range got {
		if apiVersion != c.group+"/"+v {
			t.Errorf("%d objects stored at %s in etcd, want %s/%s", n, apiVersion, c.group, v)
		}
	}
}

// TestFlakyNetwork: migrate of 3,000 objects and an upgrade of the release, through a
// tunnel that cuts 2% of the new connections (half before the request, half in the middle of
// it) and resets every open connection twice a second (over HTTP/2 that fails every request in
// flight), complete with nothing lost: every object at the new storage version, storedVersions
// trimmed, the managers kept.
func TestFlakyNetwork(t *testing.T) {
	proxy, kc := proxyTo(t, envB)

	t.Run("migrate 3000", func(t *testing.T) {
		const group = "flaky.migrate.example.com"
		c := setup(t, envB, group, "m", 0)
		c.createMany(t, "m", 3000)
		proxy.DropConnections(0.02)
		defer proxy.DropConnections(0)
		stop := proxy.ResetEvery(500 * time.Millisecond)
		res := newRunner(t).Run("migrate", "gadgets."+group, "--to", "v1", "--yes", "--kubeconfig", kc, "-o", "json")
		resets := stop()
		t.Logf("%d resets", resets)
		if resets == 0 {
			t.Fatalf("the tunnel never broke during the run")
		}
		if res.Code != 0 {
			t.Fatalf("migrate through the flaky tunnel: exit %d\n%s", res.Code, res.Stderr)
		}
		var rep struct {
			Retries int64 `json:"retries"`
		}
		if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
			t.Fatalf("migrate -o json: %v\n%s", err, res.Stdout)
		}
		t.Logf("%d requests sent again", rep.Retries)
		if rep.Retries == 0 {
			t.Errorf("the report counts no retry although the tunnel broke %d times", resets)
		}
		c.storedAt(t, "v1")
		crd, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "gadgets."+group, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
			t.Errorf("storedVersions %v, want [v1]", crd.Status.StoredVersions)
		}
	})

	t.Run("upgrade", func(t *testing.T) {
		const group = "flaky.upgrade.example.com"
		c := setup(t, envB, group, "u", 200)
		next := newRelease(t, group)
		proxy.DropConnections(0.02)
		defer proxy.DropConnections(0)
		backup := filepath.Join(t.TempDir(), "backup.yaml")
		stop := proxy.ResetEvery(300 * time.Millisecond)
		res := newRunner(t).Run("upgrade", "-f", next, "--yes", "--allow-data-loss", "--backup", backup, "--kubeconfig", kc, "-o", "json")
		resets := stop()
		t.Logf("%d resets", resets)
		if resets == 0 {
			t.Fatalf("the tunnel never broke during the run")
		}
		if res.Code != 0 {
			t.Fatalf("upgrade through the flaky tunnel: exit %d\n%s", res.Code, res.Stderr)
		}
		rep := parseReport(t, res)
		t.Logf("%d requests sent again", rep.Retries)
		if rep.Retries == 0 {
			t.Errorf("the report counts no retry although the tunnel broke %d times", resets)
		}
		proxy.DropConnections(0)
		c.checkUpgraded(t)
		c.checkBackup(t, backup)
		c.storedAt(t, "v1")
	})
}

// TestServerGoneMidRewrite: the API server becomes unreachable in the middle of migrate's
// rewrite. Gone for a second (a restart behind a load balancer), the run rides it out; gone for
// 10 s it either rides it out too (each write is tried 8 times, each try up to 6 times by the
// transport, with back-off: measured, it outlasted 40 s) or ends with exit 3 saying to run the
// same command again, which then completes.
func TestServerGoneMidRewrite(t *testing.T) {
	proxy, kc := proxyTo(t, envB)
	for _, down := range []time.Duration{time.Second, 10 * time.Second} {
		t.Run(down.String(), func(t *testing.T) {
			group := fmt.Sprintf("gone%d.example.com", int(down.Seconds()))
			c := setup(t, envB, group, "g", 0)
			c.createMany(t, "g", 1500)
			user := newRunner(t)
			args := []string{"migrate", "gadgets." + group, "--to", "v1", "--yes", "--concurrency", "2", "--kubeconfig", kc}
			var once sync.Once
			res := user.RunKilled(func(line string, _ *os.Process) bool {
				if strings.Contains(line, "is now v1") || strings.Contains(line, "storage version") {
					once.Do(func() { go func() { time.Sleep(300 * time.Millisecond); proxy.Down(down) }() })
				}
				return false
			}, args...)
			if down < 5*time.Second {
				if res.Code != 0 {
					t.Fatalf("migrate with the server gone %s: exit %d\n%s", down, res.Code, res.Stderr)
				}
			} else if res.Code != 0 {
				if res.Code != 3 || !strings.Contains(res.Stderr, "again") {
					t.Fatalf("migrate with the server gone %s: exit %d, want 0, or 3 saying to run it again\n%s", down, res.Code, res.Stderr)
				}
				for time.Now().Before(proxy.UpAt()) {
					time.Sleep(100 * time.Millisecond)
				}
				if res = user.Run(args...); res.Code != 0 {
					t.Fatalf("migrate run again once the server is back: exit %d\n%s", res.Code, res.Stderr)
				}
			}
			c.storedAt(t, "v1")
		})
	}
}

// TestServerErrors: the API server (or the load balancer before it) answers 3% of the
// requests with 429 (Retry-After), 503, or a 500 after carrying the request out; upgrade of
// 200 objects, then migrate of 1,000, through it. Each run ends complete, or with exit 3 and
// the command to run again, which is run until it ends; then nothing is lost (every object at
// v1, storedVersions trimmed, both managers kept, the backup holding every consented field),
// no write the API server carried out was sent again with the same body, and the JSON report
// counts the requests sent again.
func TestServerErrors(t *testing.T) {
	proxy, kc := proxyTo(t, envB, testenv.ServerErrors())
	runUntilDone := func(t *testing.T, user *testenv.User, args ...string) result {
		t.Helper()
		for i := 1; ; i++ {
			res := user.Run(args...)
			if res.Code == 0 || i == 4 {
				return res
			}
			if res.Code != 3 || !strings.Contains(res.Stderr, "again") {
				t.Fatalf("run %d: exit %d, want 0, or 3 saying to run it again\n%s", i, res.Code, res.Stderr)
			}
			t.Logf("run %d: exit 3: %s", i, lastLineOf(res.Stderr))
		}
	}
	t.Run("upgrade", func(t *testing.T) {
		const group = "errors.upgrade.example.com"
		c := setup(t, envB, group, "u", 200)
		backup := filepath.Join(t.TempDir(), "backup.yaml")
		proxy.Fail(0.03, nil)
		defer proxy.Fail(0, nil)
		res := runUntilDone(t, newRunner(t), "upgrade", "-f", newRelease(t, group), "--yes", "--allow-data-loss", "--backup", backup, "--kubeconfig", kc, "-o", "json")
		if res.Code != 0 {
			t.Fatalf("upgrade through a server failing 3%% of requests: exit %d\n%s", res.Code, res.Stderr)
		}
		rep := parseReport(t, res)
		t.Logf("injected %v; %d requests sent again (last run)", proxy.Injected(), rep.Retries)
		proxy.Fail(0, nil)
		c.checkUpgraded(t)
		c.checkBackup(t, backup)
		c.storedAt(t, "v1")
	})
	t.Run("migrate 1000", func(t *testing.T) {
		const group = "errors.migrate.example.com"
		c := setup(t, envB, group, "m", 0)
		c.createMany(t, "m", 1000)
		proxy.Fail(0.03, nil)
		defer proxy.Fail(0, nil)
		res := runUntilDone(t, newRunner(t), "migrate", "gadgets."+group, "--to", "v1", "--yes", "--kubeconfig", kc, "-o", "json")
		if res.Code != 0 {
			t.Fatalf("migrate through a server failing 3%% of requests: exit %d\n%s", res.Code, res.Stderr)
		}
		var rep struct {
			Retries int64 `json:"retries"`
		}
		if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
			t.Fatalf("migrate -o json: %v\n%s", err, res.Stdout)
		}
		t.Logf("injected %v; %d requests sent again", proxy.Injected(), rep.Retries)
		if rep.Retries == 0 {
			t.Errorf("the report counts no request sent again although the proxy failed %v", proxy.Injected())
		}
		proxy.Fail(0, nil)
		c.storedAt(t, "v1")
	})
	inj := proxy.Injected()
	for _, code := range []int{429, 500, 503} {
		if inj[code] == 0 {
			t.Errorf("the proxy never answered %d: the test did not try it (injected %v)", code, inj)
		}
	}
	for _, d := range proxy.Duplicates() {
		t.Errorf("a write the API server carried out was sent again with the same body, and carried out again: %s", d)
	}
}

func lastLineOf(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestAPIServerRestartMidRewrite: the real kube-apiserver is killed (SIGKILL: requests and
// watches cut, nothing drained) in the middle of migrate's rewrite and started again 2 s
// later with the same certificates and etcd. The run rides it out, or ends with exit 3 saying
// to run it again, which then completes: every object stored at v1 in etcd, storedVersions
// [v1].
func TestAPIServerRestartMidRewrite(t *testing.T) {
	const group = "restart.example.com"
	c := setup(t, envB, group, "r", 0)
	c.createMany(t, "r", 1500)
	user := newRunner(t)
	args := []string{"migrate", "gadgets." + group, "--to", "v1", "--yes", "--concurrency", "2", "--kubeconfig", envB.Kubeconfig}
	var once sync.Once
	restarted := make(chan error, 1)
	res := user.RunKilled(func(line string, _ *os.Process) bool {
		if strings.Contains(line, "is now v1") || strings.Contains(line, "storage version") {
			once.Do(func() {
				go func() {
					time.Sleep(300 * time.Millisecond)
					restarted <- envB.RestartAPIServer(context.Background(), 2*time.Second)
				}()
			})
		}
		return false
	}, args...)
	select {
	case err := <-restarted:
		if err != nil {
			t.Fatalf("restarting kube-apiserver: %v", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the API server was never restarted (the run printed no storage switch?)\n%s", res.Stderr)
	}
	t.Logf("first run: exit %d", res.Code)
	if res.Code != 0 {
		if res.Code != 3 || !strings.Contains(res.Stderr, "again") {
			t.Fatalf("migrate with the API server restarted: exit %d, want 0, or 3 saying to run it again\n%s", res.Code, res.Stderr)
		}
		if res = user.Run(args...); res.Code != 0 {
			t.Fatalf("migrate run again after the restart: exit %d\n%s", res.Code, res.Stderr)
		}
	}
	c.storedAt(t, "v1")
	crd, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "gadgets."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions %v, want [v1]", crd.Status.StoredVersions)
	}
}
