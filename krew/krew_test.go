package krew

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"text/template"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

// manifest mirrors krew's index.Plugin (sigs.k8s.io/krew/pkg/index), which is not on the module
// proxy here. Strict decoding catches fields krew would not know.
type manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string     `json:"version"`
		Homepage         string     `json:"homepage"`
		ShortDescription string     `json:"shortDescription"`
		Description      string     `json:"description"`
		Caveats          string     `json:"caveats"`
		Platforms        []platform `json:"platforms"`
	} `json:"spec"`
}

type platform struct {
	URI      string                `json:"uri"`
	Sha256   string                `json:"sha256"`
	Bin      string                `json:"bin"`
	Selector *metav1.LabelSelector `json:"selector"`
	Files    []struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"files"`
}

// fakeArchive stands for the release asset the bot would download to hash.
func fakeArchive(uri string) []byte { return []byte("archive at " + uri) }

// render does what krew-release-bot does with the template: {{ .TagName }} is the tag, and
// addURIAndSha(url, tag) expands the tag inside url and writes "uri: …" and "sha256: …" (of the
// downloaded asset) at the template's indentation.
func render(t *testing.T, tag string) []byte {
	t.Helper()
	return renderWith(t, tag, fakeArchive)
}

// renderWith renders the template with archive(uri) as the bytes the bot downloads and hashes.
func renderWith(t *testing.T, tag string, archive func(uri string) []byte) []byte {
	t.Helper()
	src, err := os.ReadFile("crdver.yaml")
	if err != nil {
		t.Fatal(err)
	}
	funcs := template.FuncMap{"addURIAndSha": func(url, tag string) (string, error) {
		var u bytes.Buffer
		if err := template.Must(template.New("url").Parse(url)).Execute(&u, struct{ TagName string }{tag}); err != nil {
			return "", err
		}
		sum := sha256.Sum256(archive(u.String()))
		return fmt.Sprintf("uri: %s\n    sha256: %s", u.String(), hex.EncodeToString(sum[:])), nil
	}}
	tmpl, err := template.New("crdver.yaml").Funcs(funcs).Parse(string(src))
	if err != nil {
		t.Fatalf("template does not parse: %v", err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, struct{ TagName string }{tag}); err != nil {
		t.Fatalf("template does not render: %v", err)
	}
	return out.Bytes()
}

var (
	safeName = regexp.MustCompile(`^[\w-]+$`)
	sha256Re = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

// validate applies krew's manifest rules (internal/index/validation in sigs.k8s.io/krew):
// supported apiVersion and kind, a safe name equal to the file name, a one-line short
// description, a semver version with a leading "v", and platforms each with uri, a valid
// sha256, bin, and a non-empty selector on os/arch only.
func validate(fileName string, m manifest) []string {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" {
		add("apiVersion %q is not krew's v1alpha2", m.APIVersion)
	}
	if m.Kind != "Plugin" {
		add("kind %q, want Plugin", m.Kind)
	}
	name := strings.TrimSuffix(fileName, filepath.Ext(fileName))
	if !safeName.MatchString(name) {
		add("plugin name %q is not allowed", name)
	}
	if m.Metadata.Name != name {
		add("metadata.name %q does not equal the file name %q", m.Metadata.Name, name)
	}
	if m.Spec.ShortDescription == "" || strings.ContainsAny(m.Spec.ShortDescription, "\r\n") {
		add("shortDescription must be one non-empty line: %q", m.Spec.ShortDescription)
	}
	if !strings.HasPrefix(m.Spec.Version, "v") {
		add("version %q must start with v", m.Spec.Version)
	} else if _, err := version.ParseSemantic(strings.TrimPrefix(m.Spec.Version, "v")); err != nil {
		add("version %q is not semver: %v", m.Spec.Version, err)
	}
	if len(m.Spec.Platforms) == 0 {
		add("no platforms")
	}
	for i, p := range m.Spec.Platforms {
		if p.URI == "" || !strings.HasPrefix(p.URI, "https://") {
			add("platforms[%d].uri %q", i, p.URI)
		}
		if !sha256Re.MatchString(p.Sha256) {
			add("platforms[%d].sha256 %q is not a sha256", i, p.Sha256)
		}
		if p.Bin == "" {
			add("platforms[%d].bin is empty", i)
		}
		if p.Files != nil && len(p.Files) == 0 {
			add("platforms[%d].files is empty but set", i)
		}
		for _, f := range p.Files {
			if f.From == "" || f.To == "" {
				add("platforms[%d].files needs from and to", i)
			}
		}
		if p.Selector == nil || (len(p.Selector.MatchLabels) == 0 && len(p.Selector.MatchExpressions) == 0) {
			add("platforms[%d] has no selector", i)
			continue
		}
		for k := range p.Selector.MatchLabels {
			if k != "os" && k != "arch" {
				add("platforms[%d].selector key %q not supported", i, k)
			}
		}
	}
	return errs
}

func TestManifestRendersAndValidates(t *testing.T) {
	for _, tag := range []string{"v0.1.0", "v1.2.3", "v2.0.0-rc.1"} {
		t.Run(tag, func(t *testing.T) {
			var m manifest
			if err := yaml.UnmarshalStrict(render(t, tag), &m); err != nil {
				t.Fatalf("rendered manifest is not valid YAML for krew's Plugin type: %v", err)
			}
			if errs := validate("crdver.yaml", m); len(errs) > 0 {
				t.Errorf("krew validation:\n%s", strings.Join(errs, "\n"))
			}
			if m.Spec.Version != tag {
				t.Errorf("version %q, want %q", m.Spec.Version, tag)
			}
			for _, p := range m.Spec.Platforms {
				sum := sha256.Sum256(fakeArchive(p.URI))
				if p.Sha256 != hex.EncodeToString(sum[:]) {
					t.Errorf("%s: sha256 is not the asset's", p.URI)
				}
				if !strings.Contains(p.URI, "/"+tag+"/") {
					t.Errorf("%s: tag not expanded in the URL", p.URI)
				}
				wantBin := "kubectl-crdver"
				if p.Selector.MatchLabels["os"] == "windows" {
					wantBin += ".exe"
				}
				if p.Bin != wantBin {
					t.Errorf("%s: bin %q, want %q", p.URI, p.Bin, wantBin)
				}
			}
		})
	}
}

// TestValidatorCatchesBadManifests: the rules above reject what krew rejects.
func TestValidatorCatchesBadManifests(t *testing.T) {
	var good manifest
	if err := yaml.UnmarshalStrict(render(t, "v0.1.0"), &good); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*manifest){
		"name differs from file": func(m *manifest) { m.Metadata.Name = "crd-ver" },
		"two-line description":   func(m *manifest) { m.Spec.ShortDescription = "a\nb" },
		"version without v":      func(m *manifest) { m.Spec.Version = "0.1.0" },
		"version not semver":     func(m *manifest) { m.Spec.Version = "v1.2" },
		"no platforms":           func(m *manifest) { m.Spec.Platforms = nil },
		"bad sha":                func(m *manifest) { m.Spec.Platforms[0].Sha256 = "abc" },
		"no bin":                 func(m *manifest) { m.Spec.Platforms[1].Bin = "" },
		"no selector":            func(m *manifest) { m.Spec.Platforms[2].Selector = nil },
		"unknown selector key": func(m *manifest) {
			m.Spec.Platforms[3].Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"distro": "debian"}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := good
			m.Spec.Platforms = append([]platform{}, good.Spec.Platforms...)
			mutate(&m)
			if errs := validate("crdver.yaml", m); len(errs) == 0 {
				t.Error("validation passed, want an error")
			}
		})
	}
}

// archiveFile is one entry of an archive's files: a path, or {src: glob, dst: dir,
// strip_parent: true}.
type archiveFile struct {
	Src         string `json:"src"`
	Dst         string `json:"dst"`
	StripParent bool   `json:"strip_parent"`
}

func (f *archiveFile) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*f = archiveFile{Src: s}
		return nil
	}
	type plain archiveFile
	return json.Unmarshal(b, (*plain)(f))
}

// goreleaserConfig is the part of .goreleaser.yaml that decides the archive names and contents.
type goreleaserConfig struct {
	Before struct {
		Hooks []string `json:"hooks"`
	} `json:"before"`
	ProjectName string `json:"project_name"`
	Builds      []struct {
		ID      string   `json:"id"`
		Binary  string   `json:"binary"`
		Main    string   `json:"main"`
		Ldflags []string `json:"ldflags"`
		Goos    []string `json:"goos"`
		Goarch  []string `json:"goarch"`
		Ignore  []struct {
			Goos   string `json:"goos"`
			Goarch string `json:"goarch"`
		} `json:"ignore"`
	} `json:"builds"`
	Archives []struct {
		IDs             []string      `json:"ids"`
		NameTemplate    string        `json:"name_template"`
		Files           []archiveFile `json:"files"`
		Formats         []string      `json:"formats"`
		FormatOverrides []struct {
			Goos    string   `json:"goos"`
			Formats []string `json:"formats"`
		} `json:"format_overrides"`
	} `json:"archives"`
}

// TestGoreleaserBuildsWhatTheManifestNames: the archives goreleaser produces for a tag are
// exactly the files the krew manifest downloads, and the build stamps the version.
func TestGoreleaserBuildsWhatTheManifestNames(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg goreleaserConfig
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	// The plugin is two executables (docs/architecture.md), built for the same platforms with
	// the same version stamp and packed into the same archives.
	if len(cfg.Builds) != 2 || len(cfg.Archives) != 1 {
		t.Fatalf("want two builds (kubectl-crdver, crdver-engine) and one archive, got %d and %d", len(cfg.Builds), len(cfg.Archives))
	}
	b, a := cfg.Builds[0], cfg.Archives[0]
	for i, want := range []string{"kubectl-crdver", "crdver-engine"} {
		bi := cfg.Builds[i]
		if bi.ID != want || bi.Binary != want || bi.Main != "./cmd/"+want {
			t.Errorf("build %d: id %q binary %q main %q, want %s from ./cmd/%s", i, bi.ID, bi.Binary, bi.Main, want, want)
		}
		if !strings.Contains(strings.Join(bi.Ldflags, " "), "-X github.com/crdver/kubectl-crdver/internal/buildinfo.Version={{ .Tag }}") {
			t.Errorf("%s: ldflags do not stamp internal/buildinfo.Version: %q", want, bi.Ldflags)
		}
		if diff := cmp.Diff(b.Goos, bi.Goos); diff != "" || !cmp.Equal(b.Goarch, bi.Goarch) || !cmp.Equal(b.Ignore, bi.Ignore) {
			t.Errorf("%s is not built for the same platforms as %s", want, b.ID)
		}
		if !contains(a.IDs, bi.ID) {
			t.Errorf("the archive packs builds %v, not %s", a.IDs, bi.ID)
		}
	}
	const tag = "v1.2.3"
	var produced []string
	for _, goos := range b.Goos {
	arch:
		for _, goarch := range b.Goarch {
			for _, ig := range b.Ignore {
				if ig.Goos == goos && ig.Goarch == goarch {
					continue arch
				}
			}
			var name bytes.Buffer
			data := map[string]string{"ProjectName": cfg.ProjectName, "Tag": tag, "Os": goos, "Arch": goarch}
			if err := template.Must(template.New("n").Parse(a.NameTemplate)).Execute(&name, data); err != nil {
				t.Fatal(err)
			}
			format := a.Formats[0]
			for _, o := range a.FormatOverrides {
				if o.Goos == goos {
					format = o.Formats[0]
				}
			}
			produced = append(produced, name.String()+"."+format)
		}
	}
	var m manifest
	if err := yaml.UnmarshalStrict(render(t, tag), &m); err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, p := range m.Spec.Platforms {
		named = append(named, path.Base(p.URI))
		os, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		if !strings.Contains(path.Base(p.URI), "_"+os+"_"+arch+".") {
			t.Errorf("%s is selected for %s/%s", p.URI, os, arch)
		}
	}
	sort.Strings(produced)
	sort.Strings(named)
	if diff := cmp.Diff(produced, named); diff != "" {
		t.Errorf("goreleaser archives vs krew manifest URIs (-goreleaser +krew):\n%s", diff)
	}
	want := []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"}
	if len(named) != len(want) {
		t.Errorf("%d platforms, want %d (%v)", len(named), len(want), want)
	}
}
