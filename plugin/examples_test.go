package plugin

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// offlineExamples are the example commands of README.md, of every page under docs/ and of
// --help that need no cluster, with their documented exit codes. Each must appear word for word
// (in the pages as "$ kubectl crdver ARGS", --help as "kubectl crdver ARGS"), so the list cannot
// drift from the text, and each runs as written from the repository root with its files from
// testdata/. stdin, when set, is what the example redirects into the command ("< /dev/zero").
var offlineExamples = []struct {
	args  string
	code  int
	stdin string
}{
	{args: "versions -f testdata/crds/crontab.yaml", code: 0},
	{args: "plan --old-file testdata/releases/cert-manager/v0.16.1 --releases testdata/releases/cert-manager -f testdata/releases/cert-manager/v1.7.3", code: 1},
	{args: "convert --crd-file testdata/releases/gateway-api/v1.0.0/gateway.networking.k8s.io_httproutes.yaml --to v1 -f testdata/manifests --check", code: 1},
	{args: "convert --crd-file testdata/releases/gateway-api/v1.0.0/gateway.networking.k8s.io_httproutes.yaml --to v1 -f testdata/manifests/gateway-api --write --dry-run --kube-version 1.34", code: 0},
	{args: "convert --crd-file testdata/crds/crontab.yaml --to v1 -f testdata/manifests/crontab --write --dry-run", code: 1},
	{args: "convert --crd-file testdata/releases/strimzi/0.51.0 --to v1 -f testdata/releases/strimzi/samples/examples-0.48.0 --write --dry-run", code: 1},
	{args: "convert --crd-file testdata/releases/cert-manager/v1.7.3 -f testdata/releases/cert-manager/samples --check", code: 1},
	{args: "versions -f testdata/crds/crontab.yaml -o wide", code: 0},
	{args: "versions -f testdata/crds/crontab-release.yaml", code: 0},
	{args: "versions -f testdata/crds/crontab-release.yaml --can-remove v1alpha1", code: 1},
	{args: "versions --sort v1 v2beta1 v1alpha1 v2", code: 0},
	{args: "versions --sort v1 v10 foo10 v2 v11alpha2 v3beta1 foo1 v12alpha1 v10beta3 v11beta2", code: 0},
	{args: "versions -f testdata/crds/crontab.yaml -o json", code: 0},
	{args: "versions -f -", code: 2, stdin: "/dev/zero"}, // more than the 16 MiB limit of zeros
	{args: "versions -f testdata/kubeversion/distinct-crd.yaml --kube-version 1.34", code: 2},
	{args: "versions -f testdata/kubeversion/distinct-crd.yaml --kube-version 1.35", code: 0},
	{args: "preview -f testdata/preview/widgets.yaml --crd-file testdata/crds/widget.yaml --diff", code: 1},
	{args: "preview -f testdata/preview/widgets.yaml --crd-file testdata/crds/widget.yaml", code: 1},
	{args: "preview -f testdata/preview/widgets.yaml --crd-file testdata/crds/widget.yaml --field-validation Strict", code: 1},
	{args: "preview -f testdata/preview/widgets.yaml --crd-file testdata/crds/widget.yaml --version v1beta1 -o json", code: 1},
	{args: "preview -f testdata/preview/crontab-v1beta1.yaml --crd-file testdata/crds/crontab.yaml", code: 0},
	{args: "preview -f testdata/preview/widget-new.yaml --old-file testdata/preview/widget-old.yaml --crd-file testdata/crds/widget.yaml", code: 1},
	{args: "preview -f testdata/kubeversion/bgppeers-crd.yaml --crd-file testdata/kubeversion/bgppeers-crd.yaml --kube-version 1.34", code: 1},
	{args: "explain --crd-file testdata/invalid-crds/bad-cel.yaml", code: 2}, // the page shows the refusal
	{args: "explain -f testdata/explain/nonstructural-docs.yaml", code: 1},
	{args: "explain -f testdata/crds/widget.yaml", code: 0},
	{args: "explain -f testdata/crds/widget.yaml spec.ports", code: 0},
	{args: "explain -f testdata/crds/crontab.yaml --compare v1beta1,v1", code: 0},
	{args: "convert --crd-file testdata/crds/crontab.yaml --to v1 -f testdata/convert/crontabs-v1beta1.yaml", code: 1},
	{args: "plan -f plan/testdata/widgets-new.yaml --old-file plan/testdata/widgets-old.yaml --objects plan/testdata/widgets-objects.yaml", code: 1},
	{args: "plan -f plan/testdata/widgets-new.yaml --old-file plan/testdata/widgets-old.yaml --objects plan/testdata/widgets-objects.yaml -o json", code: 1},
	{args: "plan -f plan/testdata/widgets-stricter.yaml --old-file plan/testdata/widgets-old.yaml --objects plan/testdata/widgets-objects.yaml", code: 0},
	{args: "plan -f plan/testdata/widgets-stricter.yaml --old-file plan/testdata/widgets-old.yaml --objects plan/testdata/widgets-objects.yaml --fail-on stricter -o json", code: 1},
	{args: "plan -f plan/testdata/certs-new.yaml --old-file plan/testdata/certs-old.yaml --objects plan/testdata/certs-objects.yaml", code: 1},
	{args: "plan -f testdata/migrate/crontab-4-v1-only.yaml --old-file testdata/migrate/crontab-2-add-v1.yaml", code: 1},
	{args: "plan -f plan/testdata/widgets-stricter.yaml --old-file plan/testdata/widgets-old.yaml --objects plan/testdata/widgets-objects.yaml -o markdown", code: 0},
}

// clusterExamples are the example commands of the pages that need a cluster (the test control
// plane of hack/democluster, where the page says so) or a running conversion webhook
// (internal/testwebhook), so TestOfflineExamples does not run them: the integration and
// end-to-end tests named in each page run the same commands against a real API server. Every
// "$ kubectl crdver" line of README.md and docs/ is in this list or in offlineExamples, so a new
// example cannot be left unrun by accident. Each entry is matched like an offline example.
var clusterExamples = []string{
	"upgrade --via v0.1.5 --via v0.2.0 -f v0.3.0 --yes --backup backup.yaml", // e2e TestPathNeedsIntermediateRelease
	"upgrade --via v1.5.5 --via v1.6.3 -f v1.7.3 --yes --backup backup.yaml", // e2e TestPathRealChains (cert-manager-0.16-to-1.7)
	// a cluster
	"versions crontabs.stable.example.com --can-remove v1beta1",
	"versions ct",
	"versions --all",
	"versions crontabs.stable.example.com",
	"versions gadgets.example.com",
	"migrate kafkausers.kafka.example.com --to v1 --yes",
	"migrate brokers.typechange.example.com --to v2 --yes --allow-data-loss", // TestOwnershipConsentOnOlderServer (kube-apiserver 1.34)
	"restore -f backup.yaml --yes",                                           // restore.TestRestoreOwnershipOnOlderServer (kube-apiserver 1.34)
	"migrate crontabs.stable.example.com --to v1",
	"migrate status crontabs.stable.example.com",
	"migrate crontabs.stable.example.com --yes --quiet -o json",
	"migrate --all",
	"retire kafkaconnects.connect.example.com v1beta2 --yes --dry-run",
	"upgrade -f /tmp/newcrds --yes --backup /tmp/before-1.0.yaml",
	"upgrade -f /tmp/newcrds --yes --backup /tmp/before-1.0.yaml --allow-data-loss",
	"upgrade -f testdata/releases/gateway-api/v1.0.0/ --dry-run",
	"upgrade -f testdata/releases/gateway-api/v1.0.0/ --yes",
	"upgrade -f testdata/releases/strimzi/1.0.0/",
	"plan -f testdata/releases/gateway-api/v1.0.0/",
	"upgrade -f new/ --yes",            // docs/concepts/stored-unserved.md: TestUpgradeStoredUnservedRefusedRestoresCRD
	"restore -f backup.yaml --dry-run", // TestRestoreAfterUpgradeAndBack
	"upgrade status -f new.yaml",       // e2e/survive: TestKillAnywhereThenRunAgain
	"doctor",
	"doctor -o wide",
	"doctor kafkausers.kafka.example.com",
	"doctor reports.demo.example.com databases.demo.example.com -o json",
	// a pipeline of helm or kustomize over a chart that is not in the repository; without
	// --crd-file, preview asks the cluster for the kinds the stream does not define
	"preview -f - -o name",
	"preview -f - -o name --only-rejected",
	// a conversion webhook started by internal/testwebhook (and, for the CRD file, by the test)
	"convert --crd-file /tmp/crontab-crd.yaml --to v1 -f testdata/convert/crontabs-v1beta1.yaml",
	"convert --crd-file /tmp/crontab-crd.yaml --to v1 -f testdata/convert/crontabs-v1beta1.yaml --strict",
	"convert --crd-file /tmp/crontab-crd.yaml --to v1 --from v1beta1 --generate 40 --seed 3 --keep failing.yaml",
	"convert --crd-file /tmp/crontab-crd.yaml --to v1 -f failing.yaml",
	"convert --crd-file /tmp/crontab-crd.yaml --to v1 -f testdata/convert/crontabs-v1beta1.yaml --round-trip",
	"convert --crd-file /tmp/crontab-crd.yaml --to v1 -f testdata/convert/crontabs-v1beta1.yaml --load --load-requests 30 -q", // TestConvertLoad
	"convert --crd-file /tmp/crontab-crd.yaml --to v1beta1 --from v1 --generate 200 --seed 7 --round-trip --keep /tmp/failing.yaml",
}

// docExample is one "$ kubectl crdver ..." line of a fenced block of a page, with the lines
// shown under it up to the next "$ " line or the end of the block.
type docExample struct {
	file   string // relative to the repository root
	line   int    // 1-based line of the command
	cmd    string // what follows "$ kubectl crdver "
	output []string
	// exitShown is the exit code the page shows with "; echo $?" or a following "$ echo $?"
	// line, or -1.
	exitShown int
}

// docPages lists README.md and every markdown file under docs/, from the repository root.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md"}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pages[1:])
	return pages
}

// docExamples reads every example command of the pages.
func docExamples(t *testing.T, pages []string) []docExample {
	t.Helper()
	var all []docExample
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		fence := false
		for i := 0; i < len(lines); i++ {
			if strings.HasPrefix(lines[i], "```") {
				fence = !fence
				continue
			}
			// "$ kubectl crdver ARGS", or the end of a pipeline: "$ helm template … | kubectl crdver ARGS"
			_, cmd, ok := strings.Cut(lines[i], "kubectl crdver ")
			if !fence || !strings.HasPrefix(lines[i], "$ ") || !ok || !(strings.HasPrefix(lines[i], "$ kubectl crdver ") || strings.Contains(lines[i], "| kubectl crdver ")) {
				continue
			}
			ex := docExample{file: page, line: i + 1, cmd: cmd, exitShown: -1}
			j := i + 1
			for ; j < len(lines) && !strings.HasPrefix(lines[j], "```") && !strings.HasPrefix(lines[j], "$ "); j++ {
				ex.output = append(ex.output, lines[j])
			}
			for len(ex.output) > 0 && ex.output[len(ex.output)-1] == "" {
				ex.output = ex.output[:len(ex.output)-1]
			}
			if strings.HasSuffix(cmd, "; echo $?") && len(ex.output) > 0 {
				ex.exitShown = atoiOr(ex.output[len(ex.output)-1], -2)
				ex.output = ex.output[:len(ex.output)-1]
			} else if j+1 < len(lines) && lines[j] == "$ echo $?" {
				ex.exitShown = atoiOr(lines[j+1], -2)
			}
			all = append(all, ex)
			i = j - 1
		}
	}
	return all
}

func atoiOr(s string, or int) int {
	n := 0
	for _, r := range strings.TrimSpace(s) {
		if r < '0' || r > '9' {
			return or
		}
		n = n*10 + int(r-'0')
	}
	if strings.TrimSpace(s) == "" {
		return or
	}
	return n
}

// matches reports whether the page's command line cmd is the example args: the same words,
// possibly followed by shell (a pipe, a redirection, "; …", "&& …") or a "# comment".
func matches(cmd, args string) (rest string, ok bool) {
	rest, ok = strings.CutPrefix(cmd, args)
	if !ok {
		return "", false
	}
	trimmed := strings.TrimLeft(rest, " ")
	if rest == "" || rest[0] == ';' || (rest[0] == ' ' && (trimmed == "" || strings.ContainsRune("|<>#;&", rune(trimmed[0])))) {
		return trimmed, true
	}
	return "", false
}

// TestOfflineExamples runs every offline example of README.md, of the pages under docs/ and of
// --help from the repository root: each is in the text, finds its files and ends with its
// documented exit code, and what the page shows under it is what it prints. Every other example
// of the pages must be a known cluster example. CRDVER_UPDATE_DOCS=1 rewrites the output that a
// page shows in full (not the ones shortened with "…") from the real output.
func TestOfflineExamples(t *testing.T) {
	var help strings.Builder
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		help.WriteString(c.Example + "\n")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCmd(genericiooptions.NewTestIOStreamsDiscard()))
	t.Chdir("..")
	pages := docPages(t)
	examples := docExamples(t, pages)
	if len(examples) == 0 {
		t.Fatal("no example found in README.md or docs/")
	}
	updates := map[string][]docUpdate{}

	for _, ex := range offlineExamples {
		t.Run(ex.args, func(t *testing.T) {
			var shown []docExample
			for _, d := range examples {
				if _, ok := matches(d.cmd, ex.args); ok {
					shown = append(shown, d)
				}
			}
			if len(shown) == 0 && !mentions(help.String(), "  kubectl crdver "+ex.args) {
				t.Fatalf("not an example of README.md, docs/ or --help any more: kubectl crdver %s", ex.args)
			}
			stdin := ""
			if ex.stdin == "/dev/zero" {
				stdin = strings.Repeat("\x00", 16<<20+1)
			}
			r := run(t, stdin, strings.Fields(ex.args)...)
			if r.code != ex.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, ex.code, r.stdout, r.stderr)
			}
			if r.stdout == "" && r.code != 2 {
				t.Errorf("no output; stderr:\n%s", r.stderr)
			}
			for _, d := range shown {
				checkShown(t, d, ex.code, r, updates)
			}
		})
	}

	// Every example of the pages is run above or is a known cluster example, and the files it
	// names from the repository exist.
	for _, d := range examples {
		known := false
		for _, ex := range offlineExamples {
			if _, ok := matches(d.cmd, ex.args); ok {
				known = true
			}
		}
		for _, c := range clusterExamples {
			if _, ok := matches(d.cmd, c); ok {
				known = true
			}
		}
		if !known {
			t.Errorf("%s:%d: kubectl crdver %s: add it to offlineExamples (it runs here) or, if it needs a cluster or a webhook, to clusterExamples", d.file, d.line, d.cmd)
		}
		for _, f := range strings.Fields(d.cmd) {
			if strings.HasPrefix(f, "testdata/") || strings.HasPrefix(f, "plan/testdata/") {
				if _, err := os.Stat(f); err != nil {
					t.Errorf("%s:%d: the example names a missing file: %s", d.file, d.line, f)
				}
			}
		}
	}
	for _, c := range clusterExamples {
		found := false
		for _, d := range examples {
			if _, ok := matches(d.cmd, c); ok {
				found = true
			}
		}
		if !found {
			t.Errorf("clusterExamples names kubectl crdver %s, which no page shows any more", c)
		}
	}

	// The files that --help examples name are in the repository.
	for _, line := range strings.Split(help.String(), "\n") {
		if !strings.Contains(line, "kubectl crdver ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if strings.Contains(f, "testdata/") {
				if _, err := os.Stat(f); err != nil {
					t.Errorf("--help example names a missing file: %s", strings.TrimSpace(line))
				}
			}
		}
	}

	if os.Getenv("CRDVER_UPDATE_DOCS") != "" {
		writeDocUpdates(t, updates)
	}
}

// docUpdate replaces the output a page shows under the command on line.
type docUpdate struct {
	line     int
	old, new []string
}

// checkShown compares what page example d shows with the run's output r. Output piped or
// redirected elsewhere is not compared; a shown exit code must be the real one. A page that
// shortens the output (elided) must show lines of the real output; otherwise the page shows
// standard output and standard error as a terminal interleaves them, exactly.
func checkShown(t *testing.T, d docExample, code int, r result, updates map[string][]docUpdate) {
	t.Helper()
	if d.exitShown != -1 && d.exitShown != code {
		t.Errorf("%s:%d: the page shows exit code %d, the command ends with %d", d.file, d.line, d.exitShown, code)
	}
	cmd := d.cmd
	if i := strings.Index(cmd, "  # "); i >= 0 {
		cmd = strings.TrimSpace(cmd[:i])
	}
	if strings.ContainsAny(strings.TrimSuffix(cmd, "; echo $?"), "|>&") || len(d.output) == 0 {
		return
	}
	stdout := splitLines(r.stdout)
	stderr := splitLines(r.stderr)
	if strings.Contains(cmd, "<") { // stdin redirected: compare the error line only
		stdout = nil
	}
	shortened := false
	for _, l := range d.output {
		if elided(l) {
			shortened = true
		}
	}
	if shortened {
		real := map[string]bool{}
		for _, l := range append(append([]string{}, stdout...), stderr...) {
			real[l] = true
		}
		for _, l := range d.output {
			if !elided(l) && !real[l] {
				t.Errorf("%s:%d: the page shows a line the command does not print:\n%s", d.file, d.line, l)
			}
		}
		return
	}
	if !interleaves(d.output, stdout, stderr) {
		got := append(append([]string{}, stdout...), stderr...)
		t.Errorf("%s:%d: the page does not show what kubectl crdver %s prints (CRDVER_UPDATE_DOCS=1 go test -run TestOfflineExamples ./plugin/ rewrites it)\npage:\n%s\nstdout, then stderr:\n%s",
			d.file, d.line, d.cmd, strings.Join(d.output, "\n"), strings.Join(got, "\n"))
		updates[d.file] = append(updates[d.file], docUpdate{line: d.line, old: d.output, new: got})
	}
}

// elided reports whether a line of a page stands for lines left out: "…" or "..." alone or
// followed by what was left out ("… (the sections of …)"), or a JSON member "...": "..." in an
// abridged document.
func elided(line string) bool {
	s := strings.TrimSpace(line)
	return s == "…" || s == "..." || strings.HasPrefix(s, "… ") || strings.HasPrefix(s, `"...": "..."`)
}

func splitLines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// interleaves reports whether shown is stdout and stderr interleaved, each in its order.
func interleaves(shown, stdout, stderr []string) bool {
	if len(shown) != len(stdout)+len(stderr) {
		return false
	}
	// ok[i][j]: shown[:i+j] is stdout[:i] and stderr[:j] interleaved.
	ok := make([][]bool, len(stdout)+1)
	for i := range ok {
		ok[i] = make([]bool, len(stderr)+1)
	}
	ok[0][0] = true
	for i := 0; i <= len(stdout); i++ {
		for j := 0; j <= len(stderr); j++ {
			if (i > 0 && ok[i-1][j] && shown[i+j-1] == stdout[i-1]) || (j > 0 && ok[i][j-1] && shown[i+j-1] == stderr[j-1]) {
				ok[i][j] = true
			}
		}
	}
	return ok[len(stdout)][len(stderr)]
}

// writeDocUpdates rewrites the shown output of the examples that differ (CRDVER_UPDATE_DOCS=1).
func writeDocUpdates(t *testing.T, updates map[string][]docUpdate) {
	t.Helper()
	for file, ups := range updates {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		sort.Slice(ups, func(i, j int) bool { return ups[i].line > ups[j].line })
		for _, u := range ups {
			start := u.line // the line after the command (0-based index u.line)
			end := start + len(u.old)
			lines = append(lines[:start], append(append([]string{}, u.new...), lines[end:]...)...)
		}
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the output of %d example(s) in %s", len(ups), file)
	}
}

// mentions reports whether text holds cmd as a whole command line (followed by the end of the
// line, a blank or a semicolon).
func mentions(text, cmd string) bool {
	for rest := text; ; {
		i := strings.Index(rest, cmd)
		if i < 0 {
			return false
		}
		rest = rest[i+len(cmd):]
		if rest == "" || strings.ContainsRune("\n ;", rune(rest[0])) {
			return true
		}
	}
}
