package plugin

import (
	"strings"
	"testing"
)

// TestVersionsMarkdownOnlyWithAll: versions --help says -o markdown is for --all, and one
// CRD's -o markdown is the usage error the help announces (a newcomer tried it from the help).
func TestVersionsMarkdownOnlyWithAll(t *testing.T) {
	help := run(t, "", "versions", "--help")
	if help.code != 0 || !strings.Contains(help.stdout, "markdown (with --all)") {
		t.Errorf("versions --help (exit %d) does not say where -o markdown works:\n%s", help.code, help.stdout)
	}
	one := run(t, "", "versions", "-f", "../testdata/crds/crontab.yaml", "-o", "markdown")
	if one.code != ExitUsage || !strings.Contains(one.stderr, "-o markdown is for --all") {
		t.Errorf("versions -f crontab.yaml -o markdown: exit %d, %s", one.code, one.stderr)
	}
	all := run(t, "", "versions", "--all", "-f", "../testdata/crds/crontab.yaml", "-o", "markdown")
	if all.code != 0 || !strings.Contains(all.stdout, "crontabs.stable.example.com") {
		t.Errorf("versions --all -o markdown: exit %d\n%s%s", all.code, all.stdout, all.stderr)
	}
}
