package docs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/internal/docblock"
	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// The examples run as a reader runs them: each command line through bash, with the plugin
// built as releases are (testenv.BuildPlugin) on PATH, so that kubectl (the real one, on
// PATH) runs `kubectl crdver`. Standard output and standard error go to one pipe, in the
// order a terminal shows them. Each session has a working folder of its own that holds a
// link to every entry of the repository root (commands name testdata/… and write files of
// their own, e.g. backups, beside them) and a HOME of its own (caches, checkpoints).

// world is what the examples of one test run share: the repository root, the built plugin,
// the programs `go run` lines name (built once) and the API servers (started on first use).
type world struct {
	root   string
	bin    string // the folder of kubectl-crdver and crdver-engine
	tmp    string
	mu     sync.Mutex
	built  map[string]string       // go run package -> executable
	envs   map[string]*testenv.Env // Kubernetes minor ("" current) -> API server
	report *costs
}

// costs is what the run spent, for the figures in docs/development.md.
type costs struct {
	start    time.Time
	commands int
}

// session is one example session: its folders, the exit code of its last command and the
// processes its "&" lines started.
type session struct {
	w          *world
	name       string
	dir, home  string
	kubeconfig string
	last       int
	background []*exec.Cmd
}

func newWorld(t *testing.T, root string) *world {
	t.Helper()
	tmp := t.TempDir()
	bin, err := testenv.BuildPlugin(filepath.Join(tmp, "bin"), testenv.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &world{root: root, bin: filepath.Dir(bin), tmp: tmp, built: map[string]string{}, envs: map[string]*testenv.Env{}, report: &costs{start: time.Now()}}
}

// stop stops the API servers the run started.
func (w *world) stop() {
	for _, e := range w.envs {
		e.Stop()
	}
}

// cluster returns the API server of the minor ("" the current one), started on first use.
func (w *world) cluster(t *testing.T, minor string) *testenv.Env {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.envs[minor]; e != nil {
		return e
	}
	var e *testenv.Env
	var err error
	if minor == "" {
		e, err = testenv.Start(testenv.Options{})
	} else {
		e, err = testenv.StartBuiltMinorShared(minor)
		var nb *testenv.NotBuiltError
		if errors.As(err, &nb) {
			t.Skip(nb.Error())
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	w.envs[minor] = e
	return e
}

// newSession makes a session's folders; a cluster session also gets an API server with no
// CRD left from an earlier session.
func (w *world) newSession(t *testing.T, b *docblock.Block) *session {
	t.Helper()
	home := readerLengthHome(t)
	t.Cleanup(func() { os.RemoveAll(home) })
	s := &session{w: w, name: b.Name, dir: filepath.Join(home, "kubectl-crdver"), home: home}
	if err := os.Mkdir(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(w.root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Symlink(filepath.Join(w.root, e.Name()), filepath.Join(s.dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	base := w.tmp
	s.kubeconfig = filepath.Join(base, "no-cluster-kubeconfig") // offline: nothing to reach
	if b.Kind == "cluster" {
		e := w.cluster(t, b.Kube)
		cleanCluster(t, e)
		s.kubeconfig = e.Kubeconfig
	}
	t.Cleanup(s.stop)
	return s
}

// cleanCluster deletes every CRD an earlier session left, and every custom object first (the
// API server's own clean-up of a deleted CRD's objects proved unreliable right after a run that
// switched storage versions back and forth: objects of the next session's CRD of the same name
// were found there).
func cleanCluster(t *testing.T, e *testenv.Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := apiextensionsclient.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		return
	}
	for _, crd := range list.Items {
		// Read at the storage version when it is served: no conversion webhook (the session's
		// may be gone) for the objects stored at it.
		served := ""
		for _, v := range crd.Spec.Versions {
			if v.Served && (served == "" || v.Storage) {
				served = v.Name
			}
		}
		if served == "" {
			continue
		}
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: served, Resource: crd.Spec.Names.Plural}
		objs, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue // the CRD's deletion removes them
		}
		for _, o := range objs.Items {
			_ = dyn.Resource(gvr).Namespace(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		}
	}
	if err := c.ApiextensionsV1().CustomResourceDefinitions().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := c.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("the CRDs of the previous session are not gone: %v", err)
	}
}

// stop ends the processes the session's "&" lines started.
func (s *session) stop() {
	for _, c := range s.background {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		_ = c.Wait()
	}
	s.background = nil
}

// environ is the commands' environment: this process's, with the plugin first on PATH, the
// session's HOME, cluster and a fixed time zone.
func (s *session) environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "HOME", "KUBECONFIG", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "TZ", "COLUMNS", "NO_COLOR", "TERM", "PWD", "OLDPWD":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+s.w.bin+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+s.home,
		"KUBECONFIG="+s.kubeconfig, "TZ=UTC", "PWD="+s.dir)
}

// goRunRE is a "go run ./PACKAGE ARGS" line.
var goRunRE = regexp.MustCompile(`^go run (\./\S+)(.*)$`)

// run runs one command line of the session and returns what it printed and its exit code.
func (s *session) run(t *testing.T, c *docblock.Command) ([]string, int) {
	t.Helper()
	s.w.report.commands++
	began := time.Now()
	defer func() { t.Logf("%.1fs %s", time.Since(began).Seconds(), c.Label()) }()
	script := strings.TrimSpace(c.Script())
	if script == "echo $?" {
		out := []string{strconv.Itoa(s.last)}
		s.last = 0
		return out, 0
	}
	if bg, ok := strings.CutSuffix(script, "&"); ok {
		return s.start(t, strings.TrimSpace(bg)), 0
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = s.dir, s.environ()
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("%s: still running after 5 minutes; output so far:\n%s", c.Label(), out.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", c.Label(), err)
	}
	s.last = cmd.ProcessState.ExitCode()
	return s.canon(docblock.SplitLines(out.String())), s.last
}

// start runs a line that ends with "&": in the background, until the session ends. What the
// page shows under it is its first line of output (a server saying where it listens), waited
// for. "go run ./PACKAGE" runs the package built once for the whole test run (what go run
// does, without linking it again for every session).
func (s *session) start(t *testing.T, script string) []string {
	t.Helper()
	if m := goRunRE.FindStringSubmatch(script); m != nil {
		script = "exec " + s.w.program(t, m[1]) + m[2]
	} else {
		script = "exec " + script
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = s.dir, s.environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = wr, wr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wr.Close()
	s.background = append(s.background, cmd)
	first := make(chan string, 1)
	go func() {
		br := bufio.NewReader(r)
		line, _ := br.ReadString('\n')
		first <- strings.TrimRight(line, "\n")
		_, _ = io.Copy(io.Discard, br) // the rest, unread by the page
	}()
	select {
	case line := <-first:
		return s.canon([]string{line})
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s printed nothing in 2 minutes", script)
	}
	return nil
}

// program builds the main package pkg (./path from the repository root) once per test run.
func (w *world) program(t *testing.T, pkg string) string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.built[pkg]; ok {
		return p
	}
	out := filepath.Join(w.tmp, "programs", filepath.Base(pkg))
	// Built as the plugin is (testenv.BuildPlugin), so that the packages both link are compiled
	// once: only the link is new.
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir, cmd.Env = w.root, append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	w.built[pkg] = out
	return out
}

// canon turns what the session's commands print into what the page shows: this machine's
// folders as a reader's.
func (s *session) canon(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		l = strings.ReplaceAll(l, s.dir, readerDir)
		l = strings.ReplaceAll(l, s.home, readerHome)
		out[i] = l
	}
	return out
}

// The folders a page shows: the clone a reader runs the examples in, and their HOME.
const (
	readerDir  = "/home/you/kubectl-crdver"
	readerHome = "/home/you"
)

// readerLengthHome makes a new folder whose path is as long as readerHome, so that a session's
// folders are as long as the reader's and a table wraps a path where it wraps the reader's:
// the page then shows the reader's path at the same place. It is in /tmp, not $TMPDIR (of any
// length), and removed when the test ends.
func readerLengthHome(t *testing.T) string {
	t.Helper()
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	for range 100 {
		name := "/tmp/"
		for range len(readerHome) - len(name) {
			name += string(letters[rand.IntN(len(letters))])
		}
		if err := os.Mkdir(name, 0o700); err == nil {
			return name
		} else if !errors.Is(err, fs.ErrExist) {
			t.Fatal(err)
		}
	}
	t.Fatal("no free folder name in /tmp")
	return ""
}

// describe is the cost of the run, logged at its end.
func (w *world) describe() string {
	return fmt.Sprintf("%d commands in %.1fs", w.report.commands, time.Since(w.report.start).Seconds())
}
