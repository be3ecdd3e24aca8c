package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// oneErrorLine checks that r failed with code and one "error: " line on stderr holding want
// (and no Go type names), with nothing on stdout.
func oneErrorLine(t *testing.T, r result, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d; stderr: %s", r.code, code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout not empty: %q", r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "error: ") {
		t.Errorf("stderr is not one error line: %q", r.stderr)
	}
	for _, bad := range []string{"; ;", "Go value", "json.RawMessage", "\t"} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("stderr holds %q: %q", bad, r.stderr)
		}
	}
	mustContain(t, "stderr", r.stderr, want)
}

// TestErrorPolish: issue 9's error polish list, one clear line each with the right exit code.
func TestErrorPolish(t *testing.T) {
	list := writeTemp(t, "list.yaml", "- a\n- b\n")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"did you mean", "", []string{"verions"}, 2, `unknown command "verions" for "kubectl crdver"; did you mean "version" or "versions"?`},
		{"YAML list as CRD file", "", []string{"versions", "-f", list}, 2, list + " (document 1): not a Kubernetes object: a list, not a mapping with apiVersion and kind"},
		{"YAML list as explain CRD file", "", []string{"explain", "--crd-file", list}, 2, list + " (document 1): not a Kubernetes object: a list"},
		{"YAML list as objects", "", []string{"preview", "-f", list, "--crd-file", crontabFile}, 2, list + " (document 1): not a Kubernetes object: a list"},
		{"stdin twice, preview", "x: 1\n", []string{"preview", "-f", "-", "--crd-file", "-"}, 2, "-f - and --crd-file - both read standard input, which can be read only once"},
		{"stdin twice, convert", "x: 1\n", []string{"convert", "-f", "-", "--crd-file", "-", "--to", "v1"}, 2, "-f - and --crd-file - both read standard input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oneErrorLine(t, run(t, tc.stdin, tc.args...), tc.code, tc.want)
		})
	}
	t.Run("unknown context", func(t *testing.T) {
		oneErrorLine(t, runCluster(t, "versions", "crontabs.stable.example.com", "--context", "nope"), 2, `context "nope" does not exist`)
	})
}

// TestFlagsOneMeaning: -f is the CRD input of explain too (--crd-file kept as an alias); --all
// selects every CRD in versions and -A still works there with a deprecation note; options that
// do not apply are usage errors.
func TestFlagsOneMeaning(t *testing.T) {
	t.Run("explain -f", func(t *testing.T) {
		for _, flag := range []string{"-f", "--crd-file", "--filename"} {
			r := run(t, "", "explain", flag, crontabFile, "spec")
			if r.code != 0 {
				t.Fatalf("explain %s: exit %d: %s", flag, r.code, r.stderr)
			}
			mustContain(t, "explain "+flag, r.stdout, "CRD:         crontabs.stable.example.com", "FIELD")
		}
	})
	t.Run("versions --all and deprecated -A", func(t *testing.T) {
		long := run(t, "", "versions", "--all", "-f", crontabFile)
		short := run(t, "", "versions", "-A", "-f", crontabFile)
		if long.code != 0 || short.code != 0 {
			t.Fatalf("exit codes %d, %d: %s %s", long.code, short.code, long.stderr, short.stderr)
		}
		if long.stdout != short.stdout || !strings.Contains(long.stdout, "crontabs.stable.example.com") {
			t.Errorf("-A and --all differ:\n%s\n%s", long.stdout, short.stdout)
		}
		if long.stderr != "" {
			t.Errorf("--all printed on stderr: %q", long.stderr)
		}
		mustContain(t, "stderr of -A", short.stderr, "-A has been deprecated, use --all")
		help := run(t, "", "versions", "--help")
		if strings.Contains(help.stdout, "-A, --all") {
			t.Errorf("versions --help still lists -A:\n%s", help.stdout)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"sort -o wide", []string{"versions", "--sort", "v1", "v2", "-o", "wide"}, "--sort prints version strings: -o wide does not apply"},
		{"sort --no-headers", []string{"versions", "--sort", "v1", "v2", "--no-headers"}, "--sort prints version strings: --no-headers does not apply"},
		{"compare with a field, CRD named", []string{"explain", "crontabs.stable.example.com", "spec", "-f", crontabFile, "--compare", "v1beta1,v1"}, "--compare compares whole schemas: it cannot be combined with a field path"},
		{"compare with a field, CRD from the file", []string{"explain", "spec", "-f", crontabFile, "--compare", "v1beta1,v1"}, "--compare compares whole schemas: it cannot be combined with a field path (spec)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oneErrorLine(t, run(t, "", tc.args...), 2, tc.want)
		})
	}
}

// TestExplainPaths: explain takes the paths preview prints and kubectl's <resource>.<path>
// form, and explains metadata (ObjectMeta, not part of the schema).
func TestExplainPaths(t *testing.T) {
	direct := run(t, "", "explain", "-f", crontabFile, "spec")
	if direct.code != 0 {
		t.Fatalf("explain spec: exit %d: %s", direct.code, direct.stderr)
	}
	for _, args := range [][]string{
		{"explain", "-f", crontabFile, "crontab.spec"},
		{"explain", "-f", crontabFile, "crontabs.stable.example.com", "ct.spec"},
		{"explain", "-f", crontabFile, "crontabs.stable.example.com.spec"},
		{"explain", "-f", crontabFile, "spec[0]"},
	} {
		r := run(t, "", args...)
		if r.code != 0 || r.stdout != direct.stdout {
			t.Errorf("%v: exit %d, stderr %q; output differs from explain spec:\n%s", args, r.code, r.stderr, r.stdout)
		}
	}
	gw := filepath.Join("..", "..", "shared", "corpus", "crds", "gateway-api__httproutes.gateway.networking.k8s.io.yaml")
	if _, err := os.Stat(gw); err == nil {
		a := run(t, "", "explain", "-f", gw, "spec.rules.matches")
		b := run(t, "", "explain", "-f", gw, "spec.rules[0].matches")
		c := run(t, "", "explain", "-f", gw, "httproute.spec.rules.matches")
		if a.code != 0 || b.stdout != a.stdout || c.stdout != a.stdout {
			t.Errorf("preview's and kubectl's path forms differ from spec.rules.matches: %q %q %q", a.stderr, b.stderr, c.stderr)
		}
		mustContain(t, "explain spec.rules[0].matches", b.stdout, "FIELD:       spec.rules.matches <[]object>")
	} else {
		t.Log("corpus absent: HTTPRoute checks skipped")
	}
	t.Run("metadata", func(t *testing.T) {
		r := run(t, "", "explain", "-f", crontabFile, "metadata")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		mustContain(t, "explain metadata", r.stdout, "not part of the CRD's schema", "\nname ", "\nlabels ", "map[string]string", "\nmanagedFields ", "\ncreationTimestamp ")
		r = run(t, "", "explain", "-f", crontabFile, "metadata.labels", "-o", "json")
		mustContain(t, "explain metadata.labels -o json", r.stdout, `"name": "labels"`)
		if strings.Contains(r.stdout, `"name": "annotations"`) {
			t.Errorf("metadata.labels lists other fields:\n%s", r.stdout)
		}
		oneErrorLine(t, run(t, "", "explain", "-f", crontabFile, "metadata.nope"), 2, `field "metadata.nope" does not exist: metadata has name, generateName`)
	})
}

// complete runs cobra's __complete and returns the candidates (without the directive line).
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	r := run(t, "", append([]string{"__complete"}, args...)...)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if l != "" && !strings.HasPrefix(l, ":") {
			out = append(out, strings.SplitN(l, "\t", 2)[0])
		}
	}
	return out
}

// TestCompletion: version flags complete with the CRD's versions (from -f/--crd-file or the
// cluster), explain's FIELD with field paths, retire's VERSION argument with versions.
func TestCompletion(t *testing.T) {
	versions := "v1 v1beta1 v1alpha1"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"versions --can-remove", []string{"versions", "-f", crontabFile, "--can-remove", ""}, versions},
		{"explain --version", []string{"explain", "-f", crontabFile, "--version", ""}, versions},
		{"preview --version", []string{"preview", "--crd-file", crontabFile, "-f", "x.yaml", "--version", ""}, versions},
		{"convert --to", []string{"convert", "--crd-file", crontabFile, "--to", ""}, versions},
		{"convert --from prefix", []string{"convert", "--crd-file", crontabFile, "--from", "v1b"}, "v1beta1"},
		{"explain field, CRD from the file", []string{"explain", "-f", crontabFile, "sp"}, "spec"},
		{"explain field path", []string{"explain", "-f", crontabFile, "crontabs.stable.example.com", "spec.r"}, "spec.replicas"},
		{"explain top level", []string{"explain", "-f", crontabFile, "crontabs.stable.example.com", ""}, "metadata spec status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(complete(t, tc.args...), " "); got != tc.want {
				t.Errorf("completions %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("from the cluster", func(t *testing.T) {
		crd := installCRDFile(t, crontabFile)
		kc := []string{"--kubeconfig", env.Kubeconfig}
		for _, args := range [][]string{
			{"migrate", crd.Name, kc[0], kc[1], "--to", ""},
			{"retire", crd.Name, kc[0], kc[1], "--to", ""},
			{"retire", crd.Name, kc[0], kc[1], ""},
			{"versions", crd.Name, kc[0], kc[1], "--can-remove", ""},
		} {
			if got := strings.Join(complete(t, args...), " "); got != versions {
				t.Errorf("%v: completions %q, want %q", args, got, versions)
			}
		}
	})
}

// TestVersionsTableFits120Columns: every corpus CRD's `versions -f` table fits 120 columns
// (NOTES wrap); -o wide keeps each version's notes on one line.
func TestVersionsTableFits120Columns(t *testing.T) {
	checkCorpusWidth(t, "versions", "-f")
	wide := run(t, "", "versions", "-o", "wide", "-f", filepath.Join("..", "..", "shared", "corpus", "crds", "crossplane__compositeresourcedefinitions.apiextensions.crossplane.io.yaml"))
	mustContain(t, "versions -o wide", wide.stdout, "deprecated storage version; not safe to remove: storage version")
}

// TestColorFlag: --color takes auto, always or never, and only with --diff.
func TestColorFlag(t *testing.T) {
	objs, crd := td("preview", "widgets.yaml"), td("crds", "widget.yaml")
	oneErrorLine(t, run(t, "", "preview", "-f", objs, "--crd-file", crd, "--diff", "--color", "pink"), 2, `--color "pink" is not supported: use auto, always or never`)
	oneErrorLine(t, run(t, "", "preview", "-f", objs, "--crd-file", crd, "--color", "always"), 2, "--color colours the --diff output: give it with --diff")
	if r := run(t, "", "preview", "-f", objs, "--crd-file", crd, "--diff"); strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("colour on a non-terminal with --color=auto:\n%q", r.stdout)
	}
	r := run(t, "", "preview", "-f", objs, "--crd-file", crd, "--diff", "--color=always")
	mustContain(t, "preview --diff --color=always", r.stdout, "\x1b[31m-", "\x1b[32m+", "\n--- input\n")
}

// TestVersionsAllRefusesDuplicates: versions --all -f DIR refuses a CRD defined twice, naming
// both places, as versions -f DIR NAME refuses it.
func TestVersionsAllRefusesDuplicates(t *testing.T) {
	dir := t.TempDir()
	crd, err := os.ReadFile(crontabFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.yaml", "b.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), crd, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	oneErrorLine(t, run(t, "", "versions", "--all", "-f", dir), 2,
		"crontabs.stable.example.com is defined 2 times, in "+filepath.Join(dir, "a.yaml")+" (document 1) and "+filepath.Join(dir, "b.yaml")+" (document 1): pass only one file that defines it")
	oneErrorLine(t, run(t, "", "versions", "crontabs.stable.example.com", "-f", dir), 2, "crontabs.stable.example.com is defined 2 times, in "+filepath.Join(dir, "a.yaml")+" (document 1) and "+filepath.Join(dir, "b.yaml")+" (document 1): pass only one file that defines it")
	oneErrorLine(t, run(t, string(crd)+"\n---\n"+string(crd), "versions", "--all", "-f", "-"), 2, "crontabs.stable.example.com is defined 2 times, in stdin (document 1) and stdin (document 2): pass only one file that defines it")
}

// TestExplainFits120Columns: explain's field table, description and CEL rules of every corpus
// CRD's spec fit 120 columns (long defaults abbreviated, constraints and rules wrapped); -o json
// keeps every rule whole.
func TestExplainFits120Columns(t *testing.T) {
	checkCorpusWidth(t, "explain", "spec", "-f")
	gw := filepath.Join("..", "..", "shared", "corpus", "crds", "gateway-api__httproutes.gateway.networking.k8s.io.yaml")
	r := run(t, "", "explain", "-f", gw, "spec.rules", "-o", "json")
	mustContain(t, "explain -o json", r.stdout, `!(has(self.request) \u0026\u0026 has(self.backendRequest) \u0026\u0026 duration(self.request) != duration('0s') \u0026\u0026 duration(self.backendRequest) \u003e duration(self.request))`)
}

// TestNoHeadersWhereItApplies: --no-headers is for tables; with -o json|yaml or on version
// (no table) it is a usage error, not ignored.
func TestNoHeadersWhereItApplies(t *testing.T) {
	oneErrorLine(t, run(t, "", "versions", "-f", crontabFile, "-o", "json", "--no-headers"), 2, "--no-headers applies to tables: it cannot be combined with -o json")
	oneErrorLine(t, run(t, "", "explain", "-f", crontabFile, "-o", "yaml", "--no-headers"), 2, "--no-headers applies to tables: it cannot be combined with -o yaml")
	oneErrorLine(t, run(t, "", "version", "--no-headers"), 2, "version prints no table: --no-headers does not apply")
	r := run(t, "", "versions", "-f", crontabFile, "--no-headers")
	if r.code != 0 || strings.Contains(r.stdout, "RANK") {
		t.Errorf("versions --no-headers: exit %d, output:\n%s", r.code, r.stdout)
	}
}

// checkCorpusWidth runs `args... FILE` for every corpus CRD file and checks that every line of
// the output fits 120 columns; it skips the test when the corpus is absent.
func checkCorpusWidth(t *testing.T, args ...string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "..", "shared", "corpus", "crds", "*.yaml"))
	if len(files) == 0 {
		t.Skip("corpus absent (../shared/corpus/crds)")
	}
	for _, f := range files {
		r := run(t, "", append(args, f)...)
		if r.code != 0 {
			t.Errorf("%v %s: exit %d: %s", args, f, r.code, r.stderr)
			continue
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if n := len([]rune(line)); n > 120 {
				t.Errorf("%v %s: line of %d columns:\n%s", args, filepath.Base(f), n, line)
			}
		}
	}
}
