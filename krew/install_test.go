package krew

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// TestInstallFromRenderedManifest does what `kubectl krew install --manifest=<rendered>
// --archive=<built>` does, since krew itself (sigs.k8s.io/krew) cannot be built here: it builds
// this platform's release archive as .goreleaser.yaml describes it (binary at the root plus the
// listed files), renders the krew template with that archive's real sha256, picks the platform
// whose selector matches this machine, verifies the checksum, unpacks the archive, and runs the
// installed plugin through the real kubectl. It also checks what krew-index requires of an
// archive: a LICENSE file.
func TestInstallFromRenderedManifest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release binary")
	}
	if runtime.GOOS == "windows" {
		t.Skip("the test archive is a tar.gz; windows releases are zips")
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH")
	}
	raw, err := os.ReadFile(filepath.Join("..", ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg goreleaserConfig
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	files := cfg.Archives[0].Files
	var plain []string
	for _, f := range files {
		if f.Dst == "" {
			plain = append(plain, f.Src)
		}
	}
	if !contains(plain, "LICENSE") {
		t.Fatalf(".goreleaser.yaml archives carry %v; krew-index requires a LICENSE in every archive", plain)
	}

	const tag = testenv.PluginVersion
	work := t.TempDir()
	// Both executables, as the archive's builds (.goreleaser.yaml) make them.
	bin := testenv.MustBuildPlugin(t, filepath.Join(work, "build"), testenv.BuildOptions{})
	entries := map[string]string{testenv.PluginFront: bin, testenv.PluginEngine: filepath.Join(filepath.Dir(bin), testenv.PluginEngine)}
	generated := releaseFiles(t, cfg.Before.Hooks, filepath.Join(work, "release"))
	for _, f := range files {
		if f.Dst == "" {
			entries[f.Src] = filepath.Join("..", f.Src)
			continue
		}
		src, ok := strings.CutPrefix(f.Src, releaseDir+"/")
		if !ok || !f.StripParent {
			t.Fatalf(".goreleaser.yaml archive file %+v: want a glob under %s/ with strip_parent", f, releaseDir)
		}
		matches, err := filepath.Glob(filepath.Join(generated, src))
		if err != nil || len(matches) == 0 {
			t.Fatalf("%s matches nothing the before hook generates (%v)", f.Src, err)
		}
		for _, m := range matches {
			entries[path.Join(f.Dst, filepath.Base(m))] = m
		}
	}
	archive := tarGz(t, entries)
	own := "_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"

	rendered := renderWith(t, tag, func(uri string) []byte {
		if strings.HasSuffix(uri, own) {
			return archive
		}
		return fakeArchive(uri)
	})
	var m manifest
	if err := yaml.UnmarshalStrict(rendered, &m); err != nil {
		t.Fatal(err)
	}
	var chosen *platform
	for i, p := range m.Spec.Platforms {
		if p.Selector.MatchLabels["os"] == runtime.GOOS && p.Selector.MatchLabels["arch"] == runtime.GOARCH {
			chosen = &m.Spec.Platforms[i]
		}
	}
	if chosen == nil {
		t.Fatalf("no platform in the manifest matches %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if !strings.HasSuffix(path.Base(chosen.URI), own) {
		t.Fatalf("platform %s/%s downloads %s", runtime.GOOS, runtime.GOARCH, chosen.URI)
	}
	sum := sha256.Sum256(archive)
	if chosen.Sha256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("manifest sha256 %s is not the built archive's", chosen.Sha256)
	}

	// krew unpacks into store/<plugin>/<version>/ and links bin/kubectl-<name> to spec's bin.
	store := filepath.Join(work, "store", m.Metadata.Name, tag)
	unpacked := untarGz(t, archive, store)
	if len(chosen.Files) > 0 {
		t.Fatalf("the manifest lists files %v: krew would install only those; it must copy the whole archive (both executables)", chosen.Files)
	}
	for _, want := range []string{"kubectl-crdver", "crdver-engine", "LICENSE", "man/kubectl-crdver.1", "man/kubectl-crdver-plan.1", "completions/kubectl-crdver.bash", "completions/_kubectl-crdver", "completions/kubectl-crdver.fish"} {
		if !contains(unpacked, want) {
			t.Errorf("archive holds %v, no %s", unpacked, want)
		}
	}
	target := filepath.Join(store, chosen.Bin)
	if st, err := os.Stat(target); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("bin %q is not an executable in the archive (%v)", chosen.Bin, err)
	}
	binDir := filepath.Join(work, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(binDir, "kubectl-"+m.Metadata.Name)); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(kubectl, "crdver", "version")
	run.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+filepath.Join(work, "none"))
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl crdver version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), tag) {
		t.Errorf("kubectl crdver version printed %q, want the tag %s", out, tag)
	}
	// A command that kubectl-crdver hands to crdver-engine, found beside the link's target.
	crontab, err := filepath.Abs(filepath.Join("..", "testdata", "crds", "crontab.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run = exec.Command(kubectl, "crdver", "versions", "-f", crontab, "-o", "json")
	run.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+filepath.Join(work, "none"))
	out, err = run.Output()
	if err != nil {
		t.Fatalf("kubectl crdver versions -f crontab.yaml: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"storageVersion": "v1"`) {
		t.Errorf("kubectl crdver versions -f crontab.yaml -o json printed %s, want the storage version v1", out)
	}
}

// releaseDir is where .goreleaser.yaml's before hook writes the man pages and completions.
const releaseDir = ".release"

// releaseFiles runs the before hook that generates the archives' man pages and completion
// scripts (hack/docgen -release-files .release), writing into dir instead of the repository.
func releaseFiles(t *testing.T, hooks []string, dir string) string {
	t.Helper()
	for _, h := range hooks {
		args := strings.Fields(h)
		if len(args) < 5 || args[0] != "go" || args[1] != "run" || args[2] != "./hack/docgen" {
			continue
		}
		for i := range args {
			if args[i] == "-release-files" && i+1 < len(args) && args[i+1] == releaseDir {
				args[i+1] = dir
			}
			if strings.HasPrefix(args[i], "{{") {
				args[i] = "1700000000" // the hook's {{ .CommitTimestamp }}
			}
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", h, err, out)
		}
		return dir
	}
	t.Fatalf(".goreleaser.yaml has no before hook `go run ./hack/docgen -release-files %s` (hooks: %q)", releaseDir, hooks)
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// tarGz packs name→file at the archive root, as goreleaser does for the binary and extra files.
func tarGz(t *testing.T, entries map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, file := range entries {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(st.Mode().Perm()), Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// untarGz unpacks into dir and returns the names it wrote.
func untarGz(t *testing.T, archive []byte, dir string) []string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		f.Close()
		names = append(names, h.Name)
	}
	return names
}
