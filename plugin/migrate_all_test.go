package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/migrate"
)

// migrate --all: one plan table, one question, then every pending CRD migrated and trimmed;
// a clean CRD is left alone; usage errors exit 2.
func TestMigrateAllCommand(t *testing.T) {
	p1, g1, _ := migrateFixture(t, "allcmd1", 5)
	p2, g2, _ := migrateFixture(t, "allcmd2", 3)
	clean, g3, _ := migrateFixture(t, "allcmd3", 2)
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{p1, p2} {
		if _, err := migrate.SwitchStorage(ctx, c, name, "v1"); err != nil {
			t.Fatal(err)
		}
	}

	r := runCluster(t, "migrate", "--all", "--dry-run")
	if r.code != 0 {
		t.Fatalf("--dry-run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "--dry-run", r.stdout, p1, p2, "v1beta1,v1", "Dry run: nothing was written.")
	if strings.Contains(r.stdout, clean) {
		t.Errorf("the clean CRD %s is in the plan:\n%s", clean, r.stdout)
	}

	r = run(t, "no\n", "migrate", "--all", "--kubeconfig", env.Kubeconfig)
	if r.code != ExitUnavailable || !strings.Contains(r.stderr, "not confirmed") {
		t.Fatalf("answer no: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = runCluster(t, "migrate", "--all", "--yes", "--quiet", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rep MigrateAllReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	got := map[string]migrate.AllItem{}
	for _, it := range rep.Items {
		got[it.CRD] = it
	}
	for name, n := range map[string]int64{p1: 5, p2: 3} {
		it := got[name]
		if it.Outcome != migrate.OutcomeDone || it.Result == nil || it.Result.Rewritten != n || it.Trim == nil || !it.Trim.Trimmed {
			t.Errorf("%s: %+v", name, it)
		}
	}
	if _, ok := got[clean]; ok {
		t.Errorf("the clean CRD was migrated")
	}
	for _, g := range []string{g1, g2} {
		if counts, _ := storedAt(t, g); counts[g+"/v1"] == 0 || len(counts) != 1 {
			t.Errorf("%s in etcd: %v", g, counts)
		}
	}
	if counts, _ := storedAt(t, g3); counts[g3+"/v1beta1"] != 2 {
		t.Errorf("clean CRD in etcd: %v", counts)
	}
	if sv := crdOf(t, p1).Status.StoredVersions; strings.Join(sv, ",") != "v1" {
		t.Errorf("%s storedVersions %v", p1, sv)
	}
	// Each CRD's checkpoint is in the cache folder, here the temporary one TestMain set up
	// (testenv.IsolateCache), never the user's.
	for _, name := range []string{p1, p2} {
		cps, err := filepath.Glob(filepath.Join(os.Getenv("XDG_CACHE_HOME"), "kubectl-crdver", "migrate", name+"-*.json"))
		if err != nil || len(cps) == 0 {
			t.Errorf("no checkpoint of %s in XDG_CACHE_HOME %s (%v)", name, os.Getenv("XDG_CACHE_HOME"), err)
		}
	}

	r = runCluster(t, "migrate", "--all", "--dry-run")
	if r.code != 0 || strings.Contains(r.stdout, p1) {
		t.Errorf("after the run, --all still plans %s:\n%s", p1, r.stdout)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "--all", p1}, "--all migrates every CRD with a pending migration: do not name one"},
		{[]string{"migrate", "--all", "--to", "v1"}, "--to cannot be combined with --all"},
		{[]string{"migrate", "--all", "--checkpoint", "x"}, "--checkpoint cannot be combined with --all"},
	} {
		r := runCluster(t, tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, r.code, r.stderr)
		}
	}
}
