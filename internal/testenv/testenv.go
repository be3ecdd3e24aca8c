// Package testenv starts a real kube-apiserver and etcd for integration tests (through
// controller-runtime's envtest), with binaries built from the Go module proxy by
// hack/build-test-binaries.sh and cached. One environment per test package: call Main from
// TestMain.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Env is a running API server and etcd.
type Env struct {
	env *envtest.Environment
	// Config is an admin client configuration.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for Config (for --kubeconfig).
	Kubeconfig string
	// EtcdURL is the client URL of etcd, for tests that read storage directly.
	EtcdURL string
	// Assets is the folder the binaries came from.
	Assets string
	dir    string
	// restarted are kube-apiserver processes RestartAPIServer started.
	restarted []*exec.Cmd
}

// Options tune the control plane.
type Options struct {
	// APIServerArgs are extra kube-apiserver flags ("--flag=value").
	APIServerArgs []string
	// EtcdArgs are extra etcd flags ("--quota-backend-bytes=…").
	EtcdArgs []string
	// Binaries to build besides kube-apiserver and etcd (e.g. "kube-controller-manager"; with
	// KubeMinor, only where hack/tools/kube-<minor> pins it).
	ExtraBinaries []string
	// KubeMinor, when set ("1.34"), runs that older minor's kube-apiserver, built from
	// hack/tools/kube-<minor> (see AssetsForMinor), instead of the current one.
	KubeMinor string
}

// RepoRoot is the folder holding the module's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/crdver/kubectl-crdver\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("cannot find the kubectl-crdver module root above the working directory")
		}
		dir = parent
	}
}

// Assets returns the folder with the control-plane binaries: $KUBEBUILDER_ASSETS, or the cache
// that hack/build-test-binaries.sh fills (building what is missing, which takes minutes the
// first time only).
func Assets(extra ...string) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	args := append([]string{filepath.Join(root, "hack", "build-test-binaries.sh"), "kube-apiserver", "etcd"}, extra...)
	cmd := exec.Command("bash", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the test control plane (hack/build-test-binaries.sh): %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// AssetsForMinor returns the folder with an older minor's kube-apiserver (and the current
// etcd, and extra: "kube-controller-manager" where that minor's module pins it), building them
// with hack/build-test-binaries.sh --kube <minor> when missing (minutes, the first time only).
// KUBEBUILDER_ASSETS does not apply: it holds the current minor.
func AssetsForMinor(minor string, extra ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	args := append([]string{filepath.Join(root, "hack", "build-test-binaries.sh"), "--kube", minor, "kube-apiserver", "etcd"}, extra...)
	cmd := exec.Command("bash", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building kube-apiserver %s (hack/build-test-binaries.sh --kube %s %s): %w", minor, minor, strings.Join(args[3:], " "), err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// OlderMinors lists the minors that hack/tools has a kube-apiserver module for
// (hack/build-test-binaries.sh --minors), oldest first.
func OlderMinors() ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	out, err := exec.Command("bash", filepath.Join(root, "hack", "build-test-binaries.sh"), "--minors").Output()
	if err != nil {
		return nil, fmt.Errorf("hack/build-test-binaries.sh --minors: %w", err)
	}
	return strings.Fields(string(out)), nil
}

// Start starts etcd and kube-apiserver.
func Start(opts Options) (*Env, error) {
	var assets string
	var err error
	if opts.KubeMinor != "" {
		assets, err = AssetsForMinor(opts.KubeMinor, opts.ExtraBinaries...)
	} else {
		assets, err = Assets(opts.ExtraBinaries...)
	}
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "crdver-testenv-")
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	api := te.ControlPlane.GetAPIServer()
	// The binaries are named by path: envtest would otherwise take KUBEBUILDER_ASSETS (the
	// current minor, which make test sets) over BinaryAssetsDirectory, and an older minor's run
	// would start the current kube-apiserver.
	api.Path = filepath.Join(assets, "kube-apiserver")
	te.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(assets, "etcd")}
	for _, a := range opts.EtcdArgs {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		te.ControlPlane.Etcd.Configure().Append(name, value)
	}
	for _, a := range opts.APIServerArgs {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		api.Configure().Append(name, value)
	}
	cfg, err := te.Start()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, te.KubeConfig, 0o600); err != nil {
		_ = te.Stop()
		os.RemoveAll(dir)
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	return &Env{env: te, Config: cfg, Kubeconfig: kubeconfig, EtcdURL: te.ControlPlane.Etcd.URL.String(), Assets: assets, dir: dir}, nil
}

// Stop stops the control plane and removes its files.
func (e *Env) Stop() {
	if e == nil {
		return
	}
	for _, cmd := range e.restarted {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	_ = e.env.Stop()
	os.RemoveAll(e.dir)
}

// ControlPlane exposes envtest's environment (to add users, for instance).
func (e *Env) ControlPlane() *envtest.Environment { return e.env }

// Main starts one environment for the test package, runs its tests and stops it. Use it as
//
//	var env *testenv.Env
//	func TestMain(m *testing.M) { testenv.Main(m, &env, testenv.Options{}) }
//
// The tests run with a temporary user cache folder (IsolateCache): the run fails when the real
// one changed.
func Main(m *testing.M, env **Env, opts Options) {
	check, err := IsolateCache()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	e.Stop()
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		code = 1
	}
	os.Exit(code)
}

// CreateCRD creates crd and waits until it is established and its versions are in discovery.
func (e *Env) CreateCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	c, err := apiextensionsclient.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	status := crd.Status
	created, err := c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	if len(status.StoredVersions) > 0 {
		// The API server updates the status (conditions) meanwhile: retry on conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, created.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status.StoredVersions = status.StoredVersions
			_, err = c.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("setting storedVersions of %s: %w", created.Name, err)
		}
	}
	return e.WaitEstablished(ctx, crd.Name)
}

// WaitEstablished waits (at most 30 s) until the named CRD has the Established condition and
// the API server serves every version the CRD marks served. A CRD that was established
// already keeps the condition while an update adds a version, and the API server installs
// the new version's handler a moment later: a read at it before then answers 404 "the server
// could not find the requested resource" (WaitServed).
func (e *Env) WaitEstablished(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	c, err := apiextensionsclient.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	var got *apiextensionsv1.CustomResourceDefinition
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				got = crd
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
	}
	for _, v := range got.Spec.Versions {
		if !v.Served {
			continue
		}
		gvr := schema.GroupVersionResource{Group: got.Spec.Group, Version: v.Name, Resource: got.Spec.Names.Plural}
		if err := e.WaitServed(ctx, gvr); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", name, err)
		}
	}
	return got, nil
}

// WaitServed waits (at most 30 s) until the API server serves gvr: a LIST of it answers
// anything but 404.
func (e *Env) WaitServed(ctx context.Context, gvr schema.GroupVersionResource) error {
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		return !apierrors.IsNotFound(last), nil
	})
	if err != nil {
		return fmt.Errorf("%s is not served: %v (last answer: %v)", gvr, err, last)
	}
	return nil
}

// CreateCRDForTest is CreateCRD for a test: it fails t when the CRD cannot be created, and
// deletes it when t ends (DeleteCRD).
func (e *Env) CreateCRDForTest(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	created, err := e.CreateCRD(context.Background(), crd)
	if err != nil {
		t.Fatal(err)
	}
	name := crd.Name
	t.Cleanup(func() { _ = e.DeleteCRD(context.Background(), name) })
	return created
}

// DeleteCRD deletes the named CRD and waits until it is gone: until ctx ends, or for at most
// 3 minutes when ctx has no deadline. The API server's CRD finalizer deletes the objects first
// and waits up to a minute for each attempt to empty the list, then tries again, so a loaded
// machine can take longer than a minute (a 60 s wait here failed CI twice). When the CRD is
// still there, the error quotes its Terminating condition, which says what the server waits for.
func (e *Env) DeleteCRD(ctx context.Context, name string) error {
	c, err := apiextensionsclient.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	if err := c.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
	}
	var last *apiextensionsv1.CustomResourceDefinition
	var nudged time.Time
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err == nil {
			last = crd
			// The finalizer retries a failed deletion of the objects with its queue's
			// exponential back-off (up to 1,000 s): right after the CRD changed, its storage
			// answers "storage is (re)initializing" to every try, and a run of quick failures
			// pushes the next try minutes away (a CRD still there after 3 min failed a test
			// once). Any change to the CRD but its conditions queues it again at once.
			if cond := terminating(crd); cond != nil && cond.Reason == "InstanceDeletionFailed" && time.Since(nudged) > 2*time.Second {
				nudged = time.Now()
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"crdver.test/deletion-retry":"%d"}}}`, nudged.UnixNano())
				_, _ = c.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			}
		}
		return false, nil // a failed read is tried again until the deadline
	})
	if err == nil {
		return nil
	}
	if last != nil {
		if c := terminating(last); c != nil {
			return fmt.Errorf("CRD %s is still there (%s: %s): %w", name, c.Reason, c.Message, err)
		}
	}
	return fmt.Errorf("CRD %s is still there: %w", name, err)
}

// terminating is crd's Terminating condition (nil when it has none): what the CRD finalizer
// waits for, or why its last try to delete the objects failed.
func terminating(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == apiextensionsv1.Terminating {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}
