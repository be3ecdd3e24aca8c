// Package e2e runs real operator releases (testdata/releases) on a real kube-apiserver:
// apply the old release's CRDs, create the project's own sample objects at the versions their
// files name with realistic field managers, snapshot every object at every served version
// with its managedFields, then check what kubectl crdver says against what the API server
// does when the new release is applied.
package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
	"github.com/crdver/kubectl-crdver/plugin"
)

// env is the package's real kube-apiserver + etcd, shared by the release tests (each release
// has its own API groups; a test deletes its CRDs when it ends).
var env *testenv.Env

func TestMain(m *testing.M) {
	e, err := testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	env = e
	code := m.Run()
	e.Stop()
	older.stop()
	if pluginDir != "" {
		os.RemoveAll(pluginDir) // the kubectl-crdver binary the runbook tests built
	}
	os.Exit(code)
}

// sharedServer is an API server started by the first test that asks for it and shared by
// the tests that need it (each deletes its CRDs), stopped by TestMain.
type sharedServer struct {
	once sync.Once
	env  *testenv.Env
	err  error
}

// older is kube-apiserver 1.34 (olderServer).
var older sharedServer

// olderServer is the package's kube-apiserver 1.34, started once (the test is skipped when it
// is not built, as testenv.StartBuiltMinor skips).
func olderServer(t *testing.T) *testenv.Env {
	t.Helper()
	older.once.Do(func() { older.env, older.err = testenv.StartBuiltMinorShared("1.34") })
	var nb *testenv.NotBuiltError
	if errors.As(older.err, &nb) {
		t.Skip(nb.Error())
	}
	if older.err != nil {
		t.Fatal(older.err)
	}
	return older.env
}

func (s *sharedServer) stop() {
	if s.env != nil {
		s.env.Stop()
	}
}

// Field managers of the sample objects, as real clusters have them.
const (
	// managerCreate is `kubectl create -f` (an Update operation, once).
	managerCreate = "kubectl-create"
	// managerCRDs is `kubectl apply --server-side -f` of the release's CRDs.
	managerCRDs = "kubectl"
)

// release is one upgrade of a project's CRDs, from testdata/releases/<Project>/<Old> to <New>.
type release struct {
	Project  string
	Old, New string
	// Samples are globs (relative to the project folder) of the sample files created on the
	// old release, each object at the version its file names.
	Samples []string
	// Controller is the field manager of the operator, which writes status at
	// ControllerVersion (the old release's storage version when empty).
	Controller        string
	ControllerVersion string
	// Status is what the controller writes (nil: observedGeneration and a Ready condition).
	Status func(o *tracked, cur *unstructured.Unstructured) map[string]any
	// WriteMayFail names sample files (relative to the project folder) whose status write or
	// GitOps apply the old release may refuse, with why; the object is still tracked.
	WriteMayFail map[string]string
	// Applier is the GitOps tool that server-side applies the sample manifests
	// (kustomize-controller or argocd-controller), with force as they do.
	Applier string
	// Fix is what a user does to an object kubectl crdver names as rejected (by its errors):
	// the manifest edited (TestReleaseMatrix).
	Fix fixer
	// DeleteNamed: what a user does instead is delete the object (kubectl delete).
	DeleteNamed bool
	// ServedAtCreation are versions of the old release's CRDs that it does not serve and the
	// samples name: the samples are created while they are served (as an earlier release
	// served them), then the old release's files are applied as they are.
	ServedAtCreation []string
	// EarlierStorage is a version an earlier release stored at: the old release's CRDs are
	// first applied with it as the storage version, so that status.storedVersions still lists
	// it (a cluster upgraded since without a storage migration).
	EarlierStorage string
}

// tracked is one sample object created on the old release.
type tracked struct {
	Source   string // sample file, relative to testdata/releases
	CRD      string // CRD name
	Group    string
	Resource string // plural
	Kind     string
	Version  string // the version its file names
	// Manifest is the document as the file has it, with the namespace the harness gave it.
	Manifest  map[string]any
	Namespace string
	Name      string
	// Applied: the GitOps applier's first server-side apply succeeded (it manages the object).
	Applied bool
}

func (o *tracked) String() string {
	return fmt.Sprintf("%s %s/%s (%s)", o.Kind, o.Namespace, o.Name, o.Source)
}

func (o *tracked) gvr(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: o.Group, Version: version, Resource: o.Resource}
}

// harness drives one release on the shared API server.
type harness struct {
	t   *testing.T
	ctx context.Context
	rel release
	// env is the API server the release runs on: the package's, or another (newHarnessOn).
	env *testenv.Env

	dyn  dynamic.Interface
	kube kubernetes.Interface
	ext  apiextensionsclient.Interface

	// home is HOME and XDG_CACHE_HOME for kubectl and kubectl crdver (their caches).
	home string
	// webhook is the conversion webhook that stands for the project's (identity conversion:
	// only apiVersion changes), started for the first release file that has strategy Webhook.
	webhook *testwebhook.Server
	// hookURL and hookCA are where the release files' Webhook conversions point: the stand-in's,
	// or the project's own webhook's when useWebhook was called before the first releaseDir.
	hookURL string
	hookCA  []byte
	// hookV1Only: that webhook answers ConversionReview v1 alone (cert-manager's since 1.0), so
	// a release file that offers only v1beta1 (cert-manager v0.16.1's, for its own webhook of
	// then) is given [v1] instead.
	hookV1Only bool
	// crds are the names of the CRDs this harness created (deleted at the end).
	crds    map[string]bool
	objects []*tracked
	// fixed are the objects the test's scripted fixes edited (each once).
	fixed map[*tracked]bool
	// deleted are the objects the test deleted as the user does (release.DeleteNamed), with
	// the errors they were named for.
	deleted []deletedObject
}

type deletedObject struct {
	o    *tracked
	errs []string
}

func newHarness(t *testing.T, rel release) *harness {
	t.Helper()
	return newHarnessOn(t, rel, env)
}

// newHarnessOn is newHarness on API server e (e.g. olderServer's).
func newHarnessOn(t *testing.T, rel release, e *testenv.Env) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	// HOME and XDG_CACHE_HOME are h.home for kubectl and the built plugin (runStep, kubectl)
	// and, for the length of each in-process run, for the plugin's root command (crdver):
	// not for the whole test process, so that tests of different projects can run at once
	// (runByProject).
	h := &harness{t: t, ctx: ctx, rel: rel, env: e, home: t.TempDir(), crds: map[string]bool{}, fixed: map[*tracked]bool{}}
	var err error
	if h.dyn, err = dynamic.NewForConfig(h.env.Config); err != nil {
		t.Fatal(err)
	}
	if h.kube, err = kubernetes.NewForConfig(h.env.Config); err != nil {
		t.Fatal(err)
	}
	if h.ext, err = apiextensionsclient.NewForConfig(h.env.Config); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.deleteCRDs)
	return h
}

// corpus is testdata/releases.
func corpus(t testing.TB) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "testdata", "releases")
}

// releaseDir writes the CRD files of release version ver (a folder of the project) into a
// temporary folder as a user would apply them, and returns it. The files are the corpus's,
// except that a Webhook conversion's clientConfig points at the local test webhook (the
// project's webhook runs in the cluster; ours answers on 127.0.0.1 over HTTPS, caBundle set).
func (h *harness) releaseDir(ver string) string {
	h.t.Helper()
	src := filepath.Join(corpus(h.t), h.rel.Project, ver)
	files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
	if err != nil || len(files) == 0 {
		h.t.Fatalf("release %s/%s: no CRD files (%v)", h.rel.Project, ver, err)
	}
	dst := filepath.Join(h.t.TempDir(), ver)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		h.t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			h.t.Fatal(err)
		}
		var crd map[string]any
		if err := yaml.Unmarshal(b, &crd); err != nil {
			h.t.Fatalf("%s: %v", f, err)
		}
		if strategy, _, _ := unstructured.NestedString(crd, "spec", "conversion", "strategy"); strategy == string(apiextensionsv1.WebhookConverter) {
			if h.hookURL == "" {
				h.webhook = testwebhook.StartForTest(h.t, testwebhook.Options{})
				h.webhook.Set(testwebhook.Identity)
				h.useWebhook(h.webhook.URL, h.webhook.CABundle)
			}
			cc := map[string]any{"url": h.hookURL, "caBundle": base64.StdEncoding.EncodeToString(h.hookCA)}
			if err := unstructured.SetNestedField(crd, cc, "spec", "conversion", "webhook", "clientConfig"); err != nil {
				h.t.Fatal(err)
			}
			if rv, _, _ := unstructured.NestedStringSlice(crd, "spec", "conversion", "webhook", "conversionReviewVersions"); h.hookV1Only && !slices.Contains(rv, "v1") {
				h.t.Logf("release %s %s: conversionReviewVersions %v → [v1] (the webhook run in its place answers v1 only)", ver, filepath.Base(f), rv)
				if err := unstructured.SetNestedStringSlice(crd, []string{"v1"}, "spec", "conversion", "webhook", "conversionReviewVersions"); err != nil {
					h.t.Fatal(err)
				}
			}
			if b, err = yaml.Marshal(crd); err != nil {
				h.t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
			h.t.Fatal(err)
		}
	}
	return dst
}

// useWebhook points the release files' Webhook conversions at url (a project's own webhook,
// started by the test before newHarness, in place of the stand-in).
func (h *harness) useWebhook(url string, caBundle []byte) {
	h.hookURL, h.hookCA = url, caBundle
	// Cleanups run last-registered first: the CRDs go while the webhook still answers
	// (deleting objects still encoded at another version needs their conversion).
	h.t.Cleanup(h.deleteCRDs)
}

// crdName reads metadata.name of a CRD file.
func crdName(t testing.TB, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil || m.Metadata.Name == "" {
		t.Fatalf("%s: no CRD name (%v)", file, err)
	}
	return m.Metadata.Name
}

// kubectlResult is one run of the real kubectl.
type kubectlResult struct {
	stdout, stderr string
	err            error
}

// kubectl runs /usr/bin/kubectl (or $KUBECTL) against the test API server, as a user would.
func (h *harness) kubectl(args ...string) kubectlResult {
	h.t.Helper()
	bin := os.Getenv("KUBECTL")
	if bin == "" {
		bin = "/usr/bin/kubectl"
	}
	ctx, cancel := context.WithTimeout(h.ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", h.env.Kubeconfig)...)
	cmd.Env = append(os.Environ(), "HOME="+h.home, "KUBECONFIG="+h.env.Kubeconfig, "KUBECACHEDIR="+filepath.Join(h.home, ".kube", "cache"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return kubectlResult{stdout: out.String(), stderr: errOut.String(), err: err}
}

// crdverResult is one run of kubectl crdver.
type crdverResult struct {
	stdout, stderr string
	code           int
}

// inProcess serialises the in-process runs of the plugin's root command: each runs with HOME
// and XDG_CACHE_HOME pointed at its harness's home (the plugin's caches and checkpoints), which
// are process-wide.
var inProcess sync.Mutex

// crdver runs the plugin's root command in-process, as cmd/kubectl-crdver does, with HOME and
// XDG_CACHE_HOME set to h.home while it runs.
func (h *harness) crdver(args ...string) crdverResult {
	h.t.Helper()
	inProcess.Lock()
	defer inProcess.Unlock()
	defer setEnv("HOME", h.home)()
	defer setEnv("XDG_CACHE_HOME", filepath.Join(h.home, ".cache"))()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := plugin.NewRootCmd(streams)
	root.SetArgs(append(args, "--kubeconfig", h.env.Kubeconfig))
	err := root.ExecuteContext(h.ctx)
	if err != nil {
		errOut.WriteString(plugin.ErrorLine(err) + "\n")
	}
	return crdverResult{stdout: out.String(), stderr: errOut.String(), code: plugin.ExitCode(err)}
}

// setEnv sets a variable of the process and returns what puts it back.
func setEnv(key, value string) (restore func()) {
	prev, had := os.LookupEnv(key)
	_ = os.Setenv(key, value)
	return func() {
		if had {
			_ = os.Setenv(key, prev)
		} else {
			_ = os.Unsetenv(key)
		}
	}
}

// applyCRDFile applies one CRD file with `kubectl apply --server-side` (extra flags appended)
// and, when it succeeds, waits until the CRD is established.
func (h *harness) applyCRDFile(file string, extra ...string) kubectlResult {
	h.t.Helper()
	name := crdName(h.t, file)
	h.crds[name] = true
	r := h.kubectl(append([]string{"apply", "--server-side", "-f", file}, extra...)...)
	if r.err == nil {
		if _, err := h.env.WaitEstablished(h.ctx, name); err != nil {
			h.t.Fatalf("%s: %v", name, err)
		}
	}
	return r
}

// installCRDFile is the set-up's `kubectl apply --server-side -f file`: the same request
// (the file's object as a server-side apply by the field manager kubectl, not forced) sent
// with the client, without starting kubectl; it waits until the CRD is established. The
// applies whose outcome a test checks go through applyCRDFile (the real kubectl).
func (h *harness) installCRDFile(file string) error {
	h.t.Helper()
	name := crdName(h.t, file)
	h.crds[name] = true
	b, err := os.ReadFile(file)
	if err != nil {
		h.t.Fatal(err)
	}
	body, err := yaml.YAMLToJSON(b)
	if err != nil {
		h.t.Fatalf("%s: %v", file, err)
	}
	if _, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Patch(h.ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: managerCRDs}); err != nil {
		return err
	}
	if _, err := h.env.WaitEstablished(h.ctx, name); err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	return nil
}

// installOld applies the old release and fails the test if any CRD is refused.
func (h *harness) installOld() string {
	h.t.Helper()
	dir := h.releaseDir(h.rel.Old)
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		var first []string
		if v := h.rel.EarlierStorage; v != "" {
			// An earlier release stored at v: status.storedVersions keeps it.
			first = append(first, h.versionsCopy(f, func(vm map[string]any) { vm["storage"] = vm["name"] == v }))
		}
		if served := h.rel.ServedAtCreation; len(served) > 0 {
			f = h.versionsCopy(f, func(vm map[string]any) {
				vm["served"] = vm["served"] == true || slices.Contains(served, fmt.Sprint(vm["name"]))
			})
		}
		for _, f := range append(first, f) {
			if err := h.installCRDFile(f); err != nil {
				h.t.Fatalf("applying %s of %s %s: %v", filepath.Base(f), h.rel.Project, h.rel.Old, err)
			}
		}
	}
	return dir
}

// versionsCopy writes a copy of the CRD file with each entry of spec.versions changed by edit
// (as an earlier release of the project had them) and returns it.
func (h *harness) versionsCopy(file string, edit func(version map[string]any)) string {
	h.t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		h.t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		h.t.Fatalf("%s: %v", file, err)
	}
	vs, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	for _, v := range vs {
		if vm, ok := v.(map[string]any); ok {
			edit(vm)
		}
	}
	if err := unstructured.SetNestedSlice(crd, vs, "spec", "versions"); err != nil {
		h.t.Fatal(err)
	}
	if b, err = yaml.Marshal(crd); err != nil {
		h.t.Fatal(err)
	}
	out := filepath.Join(h.t.TempDir(), filepath.Base(file))
	if err := os.WriteFile(out, b, 0o644); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// deleteCRDs removes the CRDs (and so the objects) this harness created, and waits until they
// are gone, so that the next test of the same project starts clean.
//
// The CRDs are deleted at once and waited for together (each wait has its own deadline): the
// API server deletes a CRD's objects before the CRD, and one slow CRD must not use up the
// time of the next (a shared deadline failed CI once, on cert-manager's three CRDs).
func (h *harness) deleteCRDs() {
	var wg sync.WaitGroup
	for name := range h.crds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := h.env.DeleteCRD(ctx, name); err != nil && !apierrors.IsNotFound(err) {
				h.t.Errorf("deleting %s: %v", name, err)
			}
		}()
	}
	wg.Wait()
}

// liveCRD reads a CRD from the API server.
func (h *harness) liveCRD(name string) *apiextensionsv1.CustomResourceDefinition {
	h.t.Helper()
	crd, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("reading CRD %s: %v", name, err)
	}
	return crd
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func servedVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			out = append(out, v.Name)
		}
	}
	return out
}

// sampleDocs reads the documents of the release's sample files.
func (h *harness) sampleDocs() (map[string][]map[string]any, []string) {
	h.t.Helper()
	root := filepath.Join(corpus(h.t), h.rel.Project)
	docs := map[string][]map[string]any{}
	var order []string
	for _, g := range h.rel.Samples {
		files, err := filepath.Glob(filepath.Join(root, g))
		if err != nil || len(files) == 0 {
			h.t.Fatalf("samples %s/%s: no files (%v)", h.rel.Project, g, err)
		}
		for _, f := range files {
			rel, _ := filepath.Rel(corpus(h.t), f)
			b, err := os.ReadFile(f)
			if err != nil {
				h.t.Fatal(err)
			}
			d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
			for {
				var m map[string]any
				if err := d.Decode(&m); err != nil {
					if errors.Is(err, io.EOF) {
						break
					}
					h.t.Fatalf("%s: %v", rel, err)
				}
				if len(m) > 0 {
					docs[rel] = append(docs[rel], m)
				}
			}
			order = append(order, rel)
		}
	}
	return docs, order
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// namespaceFor is the namespace the objects of one sample file are created in (names repeat
// across the projects' files, and some files name namespaces of their own).
func (h *harness) namespaceFor(source string) string {
	stem := strings.TrimSuffix(filepath.Base(source), filepath.Ext(source))
	dir := filepath.Base(filepath.Dir(source))
	ns := nonDNS.ReplaceAllString(strings.ToLower(h.t.Name()+"-"+dir+"-"+stem), "-")
	ns = strings.Trim(ns, "-")
	if len(ns) > 63 {
		ns = strings.Trim(ns[len(ns)-63:], "-")
	}
	return ns
}

// createSamples creates every sample object whose kind one of the live CRDs (the old
// release) serves at the version its file names, the way clusters get them:
//
//  1. `kubectl create` (manager kubectl-create, an Update), at the file's version;
//  2. the operator writes status (manager rel.Controller, an Update of /status) at
//     ControllerVersion;
//  3. the GitOps applier server-side applies the manifest (manager rel.Applier, force),
//     at the file's version, adding its own tracking label.
//
// Documents of other kinds (Secrets, ConfigMaps, kinds of CRDs not in the corpus) and
// versions the old release does not serve are skipped and logged.
func (h *harness) createSamples(crdNames []string) []*tracked {
	h.t.Helper()
	type kindKey struct{ group, kind string }
	byKind := map[kindKey]*apiextensionsv1.CustomResourceDefinition{}
	for _, n := range crdNames {
		crd := h.liveCRD(n)
		byKind[kindKey{crd.Spec.Group, crd.Spec.Names.Kind}] = crd
	}
	docs, order := h.sampleDocs()
	for _, src := range order {
		for _, doc := range docs[src] {
			u := &unstructured.Unstructured{Object: doc}
			gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
			if err != nil {
				h.t.Fatalf("%s: %v", src, err)
			}
			crd := byKind[kindKey{gv.Group, u.GetKind()}]
			if crd == nil {
				h.t.Logf("sample %s: %s %s skipped (no CRD of the release)", src, u.GetAPIVersion(), u.GetKind())
				continue
			}
			if !slices.Contains(servedVersions(crd), gv.Version) {
				h.t.Logf("sample %s: %s %s skipped (%s does not serve %s)", src, u.GetKind(), u.GetName(), crd.Name, gv.Version)
				continue
			}
			o := &tracked{Source: src, CRD: crd.Name, Group: gv.Group, Resource: crd.Spec.Names.Plural, Kind: u.GetKind(), Version: gv.Version, Name: u.GetName()}
			if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
				o.Namespace = h.namespaceFor(src)
				h.ensureNamespace(o.Namespace)
				u.SetNamespace(o.Namespace)
			}
			o.Manifest = u.DeepCopy().Object
			created, err := h.createOne(o, crd)
			if created {
				h.objects = append(h.objects, o)
			}
			rel, _ := filepath.Rel(h.rel.Project, src)
			switch why, known := h.rel.WriteMayFail[rel]; {
			case err != nil && created && known:
				h.t.Logf("sample %s: %s: %v (expected: %s)", src, o, err, why)
			case err != nil:
				h.t.Errorf("sample %s: %s rejected by %s %s: %v", src, o, h.rel.Project, h.rel.Old, err)
			}
		}
	}
	if len(h.objects) == 0 {
		h.t.Fatalf("%s %s: no sample object created", h.rel.Project, h.rel.Old)
	}
	return h.objects
}

func (h *harness) ensureNamespace(ns string) {
	h.t.Helper()
	_, err := h.kube.CoreV1().Namespaces().Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		h.t.Fatalf("namespace %s: %v", ns, err)
	}
}

// createOne does the three writes of createSamples for one object; created says whether the
// object exists.
func (h *harness) createOne(o *tracked, crd *apiextensionsv1.CustomResourceDefinition) (created bool, err error) {
	res := func(v string) dynamic.ResourceInterface { return h.resource(o, v) }
	if _, err := res(o.Version).Create(h.ctx, &unstructured.Unstructured{Object: copyMap(o.Manifest)}, metav1.CreateOptions{FieldManager: managerCreate}); err != nil {
		return false, fmt.Errorf("create: %w", err)
	}
	cv := h.rel.ControllerVersion
	if cv == "" {
		cv = storageVersion(crd)
	}
	if h.rel.Controller != "" && hasStatus(crd, cv) {
		cur, err := res(cv).Get(h.ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return true, err
		}
		status := readyStatus(h.rel.Controller, cur.GetGeneration())
		if h.rel.Status != nil {
			status = h.rel.Status(o, cur)
		}
		cur.Object["status"] = status
		if _, err := res(cv).UpdateStatus(h.ctx, cur, metav1.UpdateOptions{FieldManager: h.rel.Controller}); err != nil {
			return true, fmt.Errorf("status update by %s at %s: %w", h.rel.Controller, cv, err)
		}
	}
	if h.rel.Applier != "" {
		if err := h.gitopsApply(o, o.Version, o.Manifest); err != nil {
			return true, err
		}
		o.Applied = true
	}
	return true, nil
}

// readyCondition is a metav1.Condition-shaped Ready=True (the shape most operators use).
func readyCondition(controller string, generation int64) map[string]any {
	return map[string]any{
		"type": "Ready", "status": "True", "reason": "Reconciled", "message": "reconciled by " + controller,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": generation,
	}
}

// readyStatus is the default status a controller writes.
func readyStatus(controller string, generation int64) map[string]any {
	return map[string]any{"observedGeneration": generation, "conditions": []any{readyCondition(controller, generation)}}
}

// gitopsApply server-side applies manifest (at version) as the GitOps applier does.
func (h *harness) gitopsApply(o *tracked, version string, manifest map[string]any) error {
	m := copyMap(manifest)
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(schema.GroupVersion{Group: o.Group, Version: version}.String())
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels["app.kubernetes.io/managed-by"] = h.rel.Applier
	u.SetLabels(labels)
	body, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	if _, err := h.resource(o, version).Patch(h.ctx, o.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: h.rel.Applier, Force: &force}); err != nil {
		return fmt.Errorf("server-side apply by %s at %s: %w", h.rel.Applier, version, err)
	}
	return nil
}

func hasStatus(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			return v.Subresources != nil && v.Subresources.Status != nil
		}
	}
	return false
}

func copyMap(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

// managerEntry is one managedFields entry, with the field set as sorted paths.
type managerEntry struct {
	Manager, Operation, APIVersion, Subresource string
	Fields                                      []string
}

// objectSnap is one object read at every served version.
type objectSnap struct {
	// Data is the object read at each served version (server-set metadata removed).
	Data map[string]map[string]any
	// ReadErrors are the versions the object could not be read at.
	ReadErrors map[string]string
	// Managers are the managedFields entries (as read at the storage version).
	Managers []managerEntry
	// StoredAPIVersion is the apiVersion the object is encoded at in etcd.
	StoredAPIVersion string
	// ResourceVersion as read at the storage version.
	ResourceVersion string
	// Stored is the object as etcd holds it (JSON), to prove a refused step wrote nothing.
	Stored string
}

// snapshot is every tracked object, by tracked pointer.
type snapshot map[*tracked]*objectSnap

// snapshot reads every tracked object at every version its live CRD serves, its managedFields
// and the apiVersion etcd holds it at.
func (h *harness) snapshot() snapshot {
	h.t.Helper()
	out := snapshot{}
	crds := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, o := range h.objects {
		crd := crds[o.CRD]
		if crd == nil {
			crd = h.liveCRD(o.CRD)
			crds[o.CRD] = crd
		}
		s := &objectSnap{Data: map[string]map[string]any{}, ReadErrors: map[string]string{}}
		managersRead := false
		for _, v := range servedVersions(crd) {
			u, err := h.get(o, v)
			if err != nil {
				s.ReadErrors[v] = err.Error()
				continue
			}
			// managedFields are stored as written, the same at every version read: from the
			// storage version's read, or any other when that one fails (a CRD just updated:
			// the API server may not serve its new storage version for a moment).
			if v == storageVersion(crd) || !managersRead {
				managersRead = true
				s.ResourceVersion = u.GetResourceVersion()
				s.Managers = s.Managers[:0]
				for _, mf := range u.GetManagedFields() {
					s.Managers = append(s.Managers, managerEntry{Manager: mf.Manager, Operation: string(mf.Operation), APIVersion: mf.APIVersion, Subresource: mf.Subresource, Fields: fieldSetPaths(mf.FieldsV1)})
				}
			}
			s.Data[v] = cleanObject(u.Object)
		}
		if stored, _, err := h.env.StoredObject(h.ctx, o.Group, o.Resource, o.Namespace, o.Name); err == nil {
			s.StoredAPIVersion, _ = stored["apiVersion"].(string)
			b, _ := json.Marshal(stored)
			s.Stored = string(b)
		} else {
			h.t.Errorf("%s: reading etcd: %v", o, err)
		}
		out[o] = s
	}
	return out
}

func (h *harness) get(o *tracked, version string) (*unstructured.Unstructured, error) {
	return h.resource(o, version).Get(h.ctx, o.Name, metav1.GetOptions{})
}

// cleanObject drops what the API server sets (and apiVersion, which differs per version read),
// keeping the data: spec, status, other top-level fields, labels and annotations.
func cleanObject(obj map[string]any) map[string]any {
	c := copyMap(obj)
	delete(c, "apiVersion")
	if md, ok := c["metadata"].(map[string]any); ok {
		keep := map[string]any{}
		for _, k := range []string{"name", "namespace", "labels", "annotations"} {
			if v, ok := md[k]; ok {
				keep[k] = v
			}
		}
		c["metadata"] = keep
	}
	return c
}

func fieldSetPaths(f *metav1.FieldsV1) []string {
	if f == nil {
		return nil
	}
	var m map[string]any
	if err := yaml.Unmarshal(f.Raw, &m); err != nil {
		return []string{"<unreadable: " + err.Error() + ">"}
	}
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := prefix + "/" + k
			out = append(out, p)
			if sub, ok := v.(map[string]any); ok {
				walk(p, sub)
			}
		}
	}
	walk("", m)
	sort.Strings(out)
	return out
}

// leaves flattens an object into path → value, paths spelled as the preview engine and plan
// spell them (keys joined by dots, list indexes in brackets). Empty maps and lists are leaves.
func leaves(obj any) map[string]any {
	out := map[string]any{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 && path != "" {
				out[path] = x
			}
			for k, c := range x {
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(p, c)
			}
		case []any:
			if len(x) == 0 {
				out[path] = x
			}
			for i, c := range x {
				walk(path+"["+strconv.Itoa(i)+"]", c)
			}
		default:
			out[path] = x
		}
	}
	walk("", obj)
	return out
}

// under reports whether leaf is path or inside it.
func under(leaf, path string) bool {
	return leaf == path || strings.HasPrefix(leaf, path+".") || strings.HasPrefix(leaf, path+"[")
}

func underAny(leaf string, paths []string) bool {
	for _, p := range paths {
		if under(leaf, p) {
			return true
		}
	}
	return false
}

// lostFields lists the data fields (leaves) of before that after lacks or holds a different
// value at, except those under ignore. This is "no field held at the old storage version is
// gone": before is the object read at the old storage version before a step, after the same
// object read afterwards (at the same version if still served, else the new storage version).
func lostFields(before, after map[string]any, ignore ...string) []string {
	a := leaves(after)
	var out []string
	for p, v := range leaves(before) {
		if underAny(p, ignore) {
			continue
		}
		if av, ok := a[p]; !ok || fmt.Sprint(av) != fmt.Sprint(v) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// lostManagers lists the managers (manager/operation/subresource) of before that after
// lacks: "every manager's entries survive".
func lostManagers(before, after []managerEntry) []string {
	key := func(e managerEntry) string { return e.Manager + "/" + e.Operation + "/" + e.Subresource }
	have := map[string]bool{}
	for _, e := range after {
		have[key(e)] = true
	}
	var out []string
	for _, e := range before {
		if !have[key(e)] {
			out = append(out, key(e))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// managersByVersion counts, per apiVersion version, the objects whose managedFields name it,
// with the managers (as plan reports them).
func managersByVersion(s snapshot, crd, group string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for o, snap := range s {
		if o.CRD != crd {
			continue
		}
		for _, e := range snap.Managers {
			gv, err := schema.ParseGroupVersion(e.APIVersion)
			if err != nil || gv.Group != group {
				continue
			}
			if out[gv.Version] == nil {
				out[gv.Version] = map[string]bool{}
			}
			out[gv.Version][e.Manager] = true
		}
	}
	return out
}

// objectsOf returns the tracked objects of one CRD.
func (h *harness) objectsOf(crd string) []*tracked {
	var out []*tracked
	for _, o := range h.objects {
		if o.CRD == crd {
			out = append(out, o)
		}
	}
	return out
}

// ssaByEveryManager checks that every manager can write every object afterwards: the GitOps
// applier server-side applies its manifest (at the file's version when still served, else at
// manifestVersion[crd] with manifests[o] when given: what the user changed the GitOps
// manifests to), the one-time creator's `kubectl label` (a real kubectl), and the controller
// updates status at the storage version. It returns one line per failure.
func (h *harness) ssaByEveryManager(manifests map[*tracked]map[string]any) []string {
	h.t.Helper()
	var fails []string
	for _, o := range h.objects {
		crd := h.liveCRD(o.CRD)
		version := o.Version
		manifest := o.Manifest
		if m, ok := manifests[o]; ok {
			manifest = m
			version = (&unstructured.Unstructured{Object: m}).GroupVersionKind().Version
		}
		if !slices.Contains(servedVersions(crd), version) {
			// The runbook told the user to change the manifest to a served version: they
			// write what the object holds at the storage version.
			version = storageVersion(crd)
			if _, ok := manifests[o]; !ok {
				if live, err := h.get(o, version); err == nil {
					m := cleanObject(live.Object)
					delete(m, "status")
					if md, ok := m["metadata"].(map[string]any); ok {
						delete(md, "labels")
						delete(md, "annotations")
					}
					m["apiVersion"] = o.Group + "/" + version
					manifest = m
				}
			}
		}
		if o.Applied {
			if err := h.gitopsApply(o, version, manifest); err != nil {
				fails = append(fails, fmt.Sprintf("%s: %v", o, err))
			}
		}
		args := []string{"label", o.Resource + "." + o.Group, o.Name, "e2e.crdver.io/touched=" + strconv.FormatInt(time.Now().UnixNano(), 10), "--overwrite"}
		if o.Namespace != "" {
			args = append(args, "-n", o.Namespace)
		}
		if r := h.kubectl(args...); r.err != nil {
			fails = append(fails, fmt.Sprintf("%s: kubectl label: %v %s", o, r.err, strings.TrimSpace(r.stderr)))
		}
		if u, err := h.get(o, storageVersion(crd)); err != nil {
			fails = append(fails, fmt.Sprintf("%s: %v", o, err))
		} else if len(u.GetManagedFields()) == 0 {
			fails = append(fails, fmt.Sprintf("%s: managedFields empty after the writes", o))
		}
	}
	return fails
}

// versionsOf lists the map's keys in order (for messages).
func versionsOf[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// storageVersions is each release CRD's live storage version, by name.
func (h *harness) storageVersions() map[string]string {
	out := map[string]string{}
	for name := range h.crds {
		out[name] = storageVersion(h.liveCRD(name))
	}
	return out
}

// parallelReleases is how many release tests of different projects runByProject runs at once:
// CRDVER_E2E_PARALLEL, else 2. Most of a release test's time is spent waiting on the API
// server and on the plugin's processes, so two at once use the CPU that one leaves idle.
func parallelReleases() int {
	if n, err := strconv.Atoi(os.Getenv("CRDVER_E2E_PARALLEL")); err == nil && n > 0 {
		return n
	}
	return 2
}

// runByProject runs fn as the subtest t.Run(name(c)) for each case, in order per project: the
// cases of one project run one after the other (they apply the same CRD names, and each
// deletes its CRDs as it ends), cases of different projects run at once, at most
// parallelReleases() of them. The subtests keep their names (-run selects them as before).
func runByProject[C any](t *testing.T, cases []C, project, name func(C) string, fn func(*testing.T, C)) {
	t.Helper()
	var order []string
	byProject := map[string][]C{}
	for _, c := range cases {
		p := project(c)
		if _, ok := byProject[p]; !ok {
			order = append(order, p)
		}
		byProject[p] = append(byProject[p], c)
	}
	slots := make(chan struct{}, parallelReleases())
	var wg sync.WaitGroup
	for _, p := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, c := range byProject[p] {
				slots <- struct{}{}
				t.Run(name(c), func(t *testing.T) { fn(t, c) })
				<-slots
			}
		}()
	}
	wg.Wait()
}
