package printers

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/convert"
	goldenfile "github.com/crdver/kubectl-crdver/internal/golden"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// The reports whose printers moved here from the command layer (plan, upgrade, the preflight
// of a rewrite, migrate --all), built here and printed at the printers' API, one golden file
// per report type and output (testdata/golden/<type>/<case>); -update rewrites them.

var sampleRunbook = []plan.RunbookStep{
	{Phase: "Before", Action: plan.ActionBackup, Commands: []string{"kubectl get widgets.v1beta1.example.com -A -o yaml > backup.yaml"}, Why: "the backup keeps every stored version's data"},
	{Phase: "Storage", Action: plan.ActionMigrate, CRDs: []string{"widgets.example.com"}, Version: "v1", Commands: []string{"kubectl crdver migrate widgets.example.com --to v1"}, Why: "the objects stored at v1beta1 are rewritten at v1"},
}

// planReport is a plan of two CRDs: an update that breaks live objects (findings, field
// managers, schema changes) and a create.
func planReport() *plan.Report {
	var findings []plan.Finding
	for i := 0; i < 12; i++ {
		findings = append(findings, plan.Finding{Namespace: "default", Name: "w-" + string(rune('a'+i)),
			PrunedOnRead: []string{"spec.legacy"}, DefaultedOnRead: []string{"spec.replicas", "spec.mode"},
			CreateErrors: []string{`spec.legacy: unknown field "legacy"`, "spec.size: Invalid value: 200: must be at most 100"},
			UpdateErrors: []string{}, UpdateWarnings: []string{"spec.size: must be at most 100 (ratcheted)"}})
	}
	var changes []plan.SchemaChange
	changes = append(changes, plan.SchemaChange{Version: "v1", From: "v1beta1", Path: "spec.legacy", Change: "removed", Breaking: true, Effect: plan.EffectLossy})
	for i := 0; i < 22; i++ {
		changes = append(changes, plan.SchemaChange{Version: "v1", Path: "spec.template.spec.containers.items.properties.resources.limits.f" + string(rune('a'+i)),
			Change: "x-kubernetes-validations added: self.size() <= 100 && self.all(x, x.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')) || has(self.override)", Effect: plan.EffectStricter})
	}
	return &plan.Report{Items: []plan.Item{
		{CRD: "widgets.example.com", Operation: plan.OperationUpdate, Verdict: plan.VerdictBreaking,
			BreakingReasons: []string{"12 objects lose spec.legacy on their next read (pruned): back them up first"},
			Apply:           plan.Apply{Allowed: true, Errors: []string{}, Warnings: []string{"v1beta1 is deprecated"}},
			StorageVersion:  plan.StorageChange{Before: "v1beta1", After: "v1"}, StoredVersionsAfterApply: []string{"v1beta1", "v1"},
			MigrationPending: true, MigrationObjects: 12,
			Versions:      plan.VersionChanges{Added: []string{"v1"}, Removed: []string{}, Unserved: []string{}, Deprecated: []string{"v1beta1"}},
			SchemaChanges: changes, Conversion: []string{"None: objects are read at any version unchanged but for the apiVersion"},
			Objects: plan.Objects{Evaluated: 12, Total: 12, ReadVersion: "v1", Findings: findings},
			Notes:   []string{"the release removes nothing served"}},
		{CRD: "gadgets.example.com", Operation: plan.OperationCreate, Verdict: plan.VerdictSafe,
			Apply: plan.Apply{Allowed: true, Errors: []string{}}, StorageVersion: plan.StorageChange{After: "v1"}, StoredVersionsAfterApply: []string{"v1"},
			Objects: plan.Objects{Total: -1}},
	}, Runbook: sampleRunbook}
}

// preflightReport: 23 objects lose a field (20 listed), one would be rejected.
func preflightReport() *preflight.Report {
	r := &preflight.Report{CRD: "widgets.example.com", Group: "example.com", Resource: "widgets", Target: "v1", Strategy: "None",
		Objects: 24, HoldingVersions: []string{"v1beta1"}, Compared: []string{"v1beta1"}, LossCount: 23, RejectedCount: 1,
		Rejected:  []preflight.Rejection{{Namespace: "default", Name: "w-bad", Errors: []string{"spec.size: Invalid value: 200: spec.size in body should be less than or equal to 100"}}},
		NotNeeded: []string{"the dry-run writes of the objects valid at v1: no admission webhook or policy matches widgets"}}
	for i := 0; i < 23; i++ {
		r.Losses = append(r.Losses, preflight.Loss{Namespace: "default", Name: "w-" + string(rune('a'+i)), HeldAt: "v1beta1", Fields: []string{"spec.legacy"}})
	}
	return r
}

// Reports of conversions that add or normalise fields and lose nothing (convert's loss rule):
// the additions are listed, as no loss.
func preflightAddedReport() *preflight.Report {
	return &preflight.Report{CRD: "clusters.cluster.x-k8s.io", Group: "cluster.x-k8s.io", Resource: "clusters", Target: "v1beta2", Strategy: "Webhook",
		Objects: 7, HoldingVersions: []string{"v1beta1"}, Compared: []string{"v1beta1"}, AddedCount: 7,
		Added: []preflight.Addition{
			{Namespace: "capi", Name: "c-1", HeldAt: "v1beta1", Added: []string{".metadata.annotations", ".status"}, Normalised: []string{".spec.topology.controlPlane.nodeVolumeDetachTimeout"}},
			{Namespace: "capi", Name: "c-2", HeldAt: "v1beta1", Added: []string{".metadata.annotations"}},
			{Namespace: "capi", Name: "c-3", HeldAt: "v1beta1", Added: []string{".metadata.annotations"}},
			{Namespace: "capi", Name: "c-4", HeldAt: "v1beta1", Added: []string{".metadata.annotations"}},
			{Namespace: "capi", Name: "c-5", HeldAt: "v1beta1", Added: []string{".metadata.annotations"}},
			{Namespace: "capi", Name: "c-6", HeldAt: "v1beta1", Added: []string{".metadata.annotations"}},
		}}
}

func upgradeAddedReport() *upgrade.Report {
	return &upgrade.Report{Plan: planReport(), Preflight: upgrade.Preflight{
		DataLoss: []upgrade.ObjectFinding{}, Rejected: []upgrade.ObjectFinding{}, InvalidOnRecreate: []upgrade.ObjectFinding{}, BlockedCRDs: []string{},
		Added: []upgrade.ObjectFinding{{CRD: "clusters.cluster.x-k8s.io", Namespace: "capi", Name: "c-1", HeldAt: "v1beta1",
			Added: []string{"metadata.annotations", "status", "spec.topology.controlPlane.nodeVolumeDetachTimeout (normalised)"}}},
	}, Problems: []string{}, Warnings: []string{}}
}

func convertAddedReport() *convert.Report {
	return &convert.Report{CRD: "clusters.cluster.x-k8s.io", Strategy: "Webhook", Webhook: "https://127.0.0.1:9443/convert", ReviewVersion: "v1", To: "v1beta2", RoundTrip: true,
		Objects: 1, Converted: 1, Requests: 2, Checks: []convert.CheckCount{{Name: convert.CheckRoundTrip, Passed: 1}},
		Added: []convert.Change{
			{Object: "capi/c-1", Direction: "v1beta1 -> v1beta2 -> v1beta1", Path: ".status", Kind: convert.DiffAdded, Detail: `added: {} appeared after the round trip`},
			{Object: "capi/c-1", Direction: "v1beta1 -> v1beta2 -> v1beta1", Path: ".spec.timeout", Kind: convert.DiffNormalised, Detail: `normalised: "5m" became "5m0s" (the same duration)`},
		}}
}

func convertWriteAddedReport() *convert.WriteReport {
	return &convert.WriteReport{CRD: "clusters.cluster.x-k8s.io", Mode: "write", To: "v1beta2", Objects: 1, Converted: 1, Files: []convert.FileResult{{
		Path: "clusters.yaml", Status: convert.FileWritten, Objects: []convert.ObjectResult{{Document: 1, Line: 1, Kind: "Cluster", Name: "capi/c-1", From: "v1beta1", To: "v1beta2", Served: convert.VersionServed,
			Added: convertAddedReport().Added}}}}}
}

func upgradeReport() *upgrade.Report {
	p := planReport()
	return &upgrade.Report{Plan: p, Preflight: upgrade.Preflight{
		DataLoss:          []upgrade.ObjectFinding{{CRD: "widgets.example.com", Namespace: "default", Name: "w-a", Fields: []string{"spec.legacy"}, HeldAt: "v1beta1"}},
		Rejected:          []upgrade.ObjectFinding{{CRD: "widgets.example.com", Namespace: "default", Name: "w-bad", Errors: []string{"spec.size: Invalid value: 200: must be at most 100"}}},
		InvalidOnRecreate: []upgrade.ObjectFinding{{CRD: "widgets.example.com", Name: "w-old", Errors: []string{`spec.mode: Unsupported value: "legacy"`}}},
		BlockedCRDs:       []string{},
		Refused:           true, Reason: "1 object would lose fields; 1 object would be rejected",
	},
		Steps: []upgrade.StepResult{
			{RunbookStep: sampleRunbook[0], State: "done", Detail: "backup.yaml"},
			{RunbookStep: sampleRunbook[1], State: "done", Detail: "12 objects rewritten at v1, status.storedVersions trimmed to [v1]"},
		},
		Backup: &upgrade.Backup{File: "/tmp/backup.yaml"},
		Verify: &upgrade.Verify{CRDs: []upgrade.VerifyCRD{{CRD: "widgets.example.com", StorageVersion: "v1", StoredVersions: []string{"v1"}, SSAChecked: 12, SSAFailures: []string{}}},
			PlanBreaking: []string{}},
		Problems: []string{}, Warnings: []string{"v1beta1 is deprecated"},
		Outcome: upgrade.Outcome{Result: upgrade.ResultComplete},
	}
}

// upgradeRefusedReport is upgradeReport refused, as upgrade.Run ends it (the outcome's
// refusals).
func upgradeRefusedReport() *upgrade.Report {
	r := upgradeReport()
	r.Outcome = upgrade.Outcome{Result: upgrade.ResultRefused, Outcome: outcome.Outcome{ExitCode: 1}, Refusals: []plan.Kind{plan.KindDataLoss, plan.KindRejectedWrite}}
	return r
}

func migrateAllReport(dry bool) *migrate.AllReport[*preflight.Report] {
	r := &migrate.AllReport[*preflight.Report]{DryRun: dry, CRDs: 5, Objects: 30, Plans: []*migrate.Plan{
		{CRD: "gadgets.example.com", StorageVersion: "v1", TargetVersion: "v1", StoredVersions: []string{"v1beta1", "v1"}, Objects: 20, Steps: []string{"rewrite 20 objects", "trim status.storedVersions to [v1]"}},
		{CRD: "gizmos.example.com", StorageVersion: "v2", TargetVersion: "v2", StoredVersions: []string{"v1", "v2"}, Objects: 10, Steps: []string{"rewrite 10 objects", "trim status.storedVersions to [v2]"}},
	}, Items: []migrate.AllItem{}}
	if !dry {
		r.Items = []migrate.AllItem{
			{CRD: "gadgets.example.com", Outcome: migrate.OutcomeDone, Result: &migrate.Result{Counts: migrate.Counts{Rewritten: 20}}, Trim: &migrate.TrimResult{Safe: true, Trimmed: true, After: []string{"v1"}}},
			{CRD: "gizmos.example.com", Outcome: migrate.OutcomeProblems, Result: &migrate.Result{Counts: migrate.Counts{Rewritten: 9, Failed: 1},
				Failures: []migrate.Failure{{Namespace: "default", Name: "g-1", Reason: "admission webhook \"deny.example.com\" denied the request"}}},
				Trim: &migrate.TrimResult{Safe: false, Reason: "1 object could not be rewritten", After: []string{"v1", "v2"}}},
		}
	}
	return r
}

func TestGoldenViews(t *testing.T) {
	cli := Human{AllListed: "-o json", WideListed: "-o wide"}
	for _, tc := range []struct {
		name   string
		p      ReportPrinter
		report Report
	}{
		{"plan/report.txt", cli, Plan(planReport())},
		{"plan/wide.txt", Human{Wide: true}, Plan(planReport())},
		{"plan/report.json", Data{}, Plan(planReport())},
		{"preflight/losses.txt", cli, Preflight(preflightReport())},
		{"preflight/library.txt", Human{}, Preflight(preflightReport())},
		{"preflight/safe.txt", Human{}, Preflight(&preflight.Report{CRD: "widgets.example.com", Target: "v1", Strategy: "None", Objects: 3})},
		{"preflight/added.txt", cli, Preflight(preflightAddedReport())},
		{"upgrade/plan-added.txt", Human{}, UpgradePlan(upgradeAddedReport())},
		{"convert/added.txt", Human{}, Convert(convertAddedReport())},
		{"convert-write/added.txt", Human{}, ConvertWrite(convertWriteAddedReport())},
		{"upgrade/plan.txt", Human{}, UpgradePlan(upgradeRefusedReport())},
		{"upgrade/result.txt", Human{}, UpgradeResult(upgradeReport(), true)},
		{"upgrade/result-not-run.txt", Human{}, UpgradeResult(upgradeReport(), false)},
		{"migrate-all/plan.txt", Human{}, MigrateAllPlan(migrateAllReport(false))},
		{"migrate-all/nothing-pending.txt", Human{}, MigrateAllPlan(&migrate.AllReport[*preflight.Report]{CRDs: 4})},
		{"migrate-all/summary.txt", Human{}, MigrateAll(migrateAllReport(false))},
		{"migrate-all/summary-wide.txt", Human{Wide: true}, MigrateAll(migrateAllReport(false))},
		{"migrate-all/dry-run.txt", Human{}, MigrateAll(migrateAllReport(true))},
		{"migrate-all/report.json", Data{}, MigrateAll(migrateAllReport(false))},
		{"migrate-all/report.yaml", Data{YAML: true}, MigrateAll(migrateAllReport(false))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.p.PrintReport(&b, tc.report); err != nil {
				t.Fatal(err)
			}
			goldenfile.Check(t, tc.name, b.String())
		})
	}
	t.Run("plan/report.md", func(t *testing.T) {
		goldenfile.Check(t, "plan/report.md", Plan(planReport()).Markdown(0))
	})
}

// As data, a view is the library's report itself (the documented -o json shape), also with a
// census (none here: files); a part prints nothing as data.
func TestViewsMarshalAsTheirReport(t *testing.T) {
	for name, tc := range map[string]struct {
		view   Report
		report any
	}{
		"plan":        {Plan(planReport()), planReport()},
		"upgrade":     {UpgradeResult(upgradeReport(), false), upgradeReport()},
		"migrate-all": {WithCensus(MigrateAll(migrateAllReport(false)), nil, []string{"a note"}), migrateAllReport(false)},
		"preflight":   {Preflight(preflightReport()), preflightReport()},
	} {
		var got, want bytes.Buffer
		if err := (Data{}).PrintReport(&got, tc.view); err != nil {
			t.Fatal(err)
		}
		js, err := json.MarshalIndent(tc.report, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		want.Write(append(js, '\n'))
		if got.String() != want.String() {
			t.Errorf("%s: -o json of the view differs from the report's JSON:\n%s\nwant\n%s", name, got.String(), want.String())
		}
	}
	var b bytes.Buffer
	if err := (Data{}).PrintPart(&b, MigratePlan(&migrate.Plan{CRD: "x"})); err != nil || b.Len() > 0 {
		t.Errorf("Data.PrintPart printed %q (%v)", b.String(), err)
	}
	if err := (Human{}).PrintReport(&b, WithCensus(SortedVersions([]string{"v2", "v1"}), nil, []string{"census unknown"})); err != nil || !strings.HasSuffix(b.String(), "v2\nv1\nnote: census unknown\n") {
		t.Errorf("WithCensus for people: %q (%v)", b.String(), err)
	}
}
