package printers

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/crdver/kubectl-crdver/explain"
	goldenfile "github.com/crdver/kubectl-crdver/internal/golden"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/restore"
)

// Golden files per report type (testdata/golden/<type>/<case>): the printers called at their
// API with reports built here, so that a change of wording or layout shows in review.
// go test ./printers/ -run TestGolden -update rewrites them.

func restoreReport(dry bool) *restore.Report {
	objs := []restore.Outcome{
		{APIVersion: "example.com/v1beta1", Kind: "Widget", Namespace: "default", Name: "w-lost", CRD: "widgets.example.com", Version: "v1", State: restore.StateRestored, Restored: []string{"spec.legacy"}},
		{APIVersion: "example.com/v1beta1", Kind: "Widget", Namespace: "default", Name: "w-same", CRD: "widgets.example.com", Version: "v1", State: restore.StateUnchanged},
		{APIVersion: "example.com/v1beta1", Kind: "Widget", Namespace: "default", Name: "w-changed", CRD: "widgets.example.com", Version: "v1", State: restore.StateConflict, Conflicts: []string{"spec.size"}, Reason: "changed since the backup: spec.size (left as it is)"},
		{APIVersion: "example.com/v1beta1", Kind: "Widget", Namespace: "default", Name: "w-deleted", CRD: "widgets.example.com", Version: "v1", State: restore.StateMissing, Reason: "deleted since the backup"},
		{APIVersion: "example.com/v1beta1", Kind: "Gadget", Namespace: "default", Name: "g-lost", CRD: "gadgets.example.com", Version: "v1", State: restore.StateNotHeld,
			NotHeld: []string{"spec.acls[0].operation", "spec.acls[1].operation", "spec.legacy"}, Reason: "no served version of gadgets.example.com holds spec.legacy"},
	}
	r := &restore.Report{DryRun: dry, Objects: objs, Counts: map[string]int{}}
	for _, o := range objs {
		r.Counts[o.State]++
	}
	return r
}

func TestGolden(t *testing.T) {
	crds := testenv.ReadCRDs(t, filepath.Join("..", "testdata", "crds", "widget.yaml"))
	crds = append(crds, testenv.ReadCRDs(t, filepath.Join("..", "testdata", "crds", "gadget.yaml"))...)
	steps := []plan.RunbookStep{
		{Phase: "Before", Action: plan.ActionBackup, Commands: []string{"kubectl get widgets.v1beta1.example.com -A -o yaml > backup.yaml"}, Why: "the backup keeps every stored version's data"},
		{Phase: "Storage", Action: plan.ActionMigrate, CRDs: []string{"widgets.example.com"}, Version: "v1", Commands: []string{"kubectl crdver migrate widgets.example.com --to v1"},
			Why: "the objects stored at v1beta1 are rewritten at v1, the version the release stores, before the release removes v1beta1 (a long explanation that wraps at the terminal width of the table)"},
		{Phase: "Release", Action: plan.ActionApply, Commands: []string{"kubectl apply --server-side --force-conflicts -f release/"}, Why: "the release"},
	}
	for _, tc := range []struct {
		name   string
		p      ReportPrinter
		report Report
	}{
		{"restore/report.txt", Human{}, Restore(restoreReport(false))},
		{"restore/dry-run.txt", Human{}, Restore(restoreReport(true))},
		{"restore/no-headers.txt", Human{NoHeaders: true}, Restore(restoreReport(false))},
		{"restore/report.json", Data{}, Restore(restoreReport(false))},
		{"versions/summary.txt", Human{}, VersionsAll(explain.Summarize(crds))},
		{"versions/widget.txt", Human{}, Versions(explain.AnalyzeVersions(crds[0], ""))},
		{"versions/widget-wide.txt", Human{Wide: true}, Versions(explain.AnalyzeVersions(crds[0], ""))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.p.PrintReport(&b, tc.report); err != nil {
				t.Fatal(err)
			}
			goldenfile.Check(t, tc.name, b.String())
		})
	}
	t.Run("runbook.txt", func(t *testing.T) {
		var b bytes.Buffer
		Runbook(&b, "Runbook", steps)
		goldenfile.Check(t, "runbook.txt", b.String())
	})
}
