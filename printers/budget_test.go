package printers

import (
	"bytes"
	"testing"

	goldenfile "github.com/crdver/kubectl-crdver/internal/golden"
	"github.com/crdver/kubectl-crdver/migrate"
)

// budgetPlan is a migrate plan of 250,000 objects with the budget of its rewrite worked out
// (migrate.EstimateBudget's fields as a queued, ordinary user meets them).
func budgetPlan() *migrate.Plan {
	return &migrate.Plan{
		CRD: "gadgets.example.com", Group: "example.com", Resource: "gadgets", Namespaced: true,
		StorageVersion: "v1", StoredVersions: []string{"v1beta1", "v1"}, TargetVersion: "v1", Objects: 250000,
		Namespaces: []migrate.NamespaceCount{{Namespace: "team-a", Objects: 200000}, {Namespace: "team-b", Objects: 50000}},
		Steps:      []string{"rewrite every object at v1 (the storage version)", "trim status.storedVersions to [v1]"},
		Budget: &migrate.Budget{
			CRD: "gadgets.example.com", Version: "v1", Objects: 250000,
			AverageBytes: 1184, SampleObjects: 200, WriteBytes: 1184 * 250000,
			RatePerSecond: 412.5, RateSample: 200, RateInFlight: 16, Seconds: 250000 / 412.5,
			StorageBytes: 734003200,
			FlowControl: &migrate.FlowControl{FlowSchema: "service-accounts", PriorityLevel: "workload-low",
				NominalSeats: 98, LimitResponse: "Queue", Queues: 128, QueueLengthLimit: 50, HandSize: 6},
		},
	}
}

// TestBudgetGolden: the budget of a rewrite as people read it, within migrate's plan (and
// retire's, and upgrade's preflight: the same printBudget) and alone, and as -o json carries
// it (plan.budget). Cases: every figure read; an exempt level with what could not be read; a
// level that rejects, at a rate that takes hours; none below migrate.MinBudgetObjects.
func TestBudgetGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      ReportPrinter
		report Report
	}{
		{"budget/migrate-plan.txt", Human{}, MigratePlan(budgetPlan())},
		{"budget/plan.json", Data{}, MigratePlan(budgetPlan())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.p.PrintReport(&b, tc.report); err != nil {
				t.Fatal(err)
			}
			goldenfile.Check(t, tc.name, b.String())
		})
	}
	for _, tc := range []struct {
		name string
		b    *migrate.Budget
	}{
		{"budget/exempt-unknown.txt", &migrate.Budget{
			CRD: "widgets.example.com", Version: "v2", Objects: 1000,
			AverageBytes: 512, SampleObjects: 200, WriteBytes: 512 * 1000,
			FlowControl: &migrate.FlowControl{FlowSchema: "exempt", PriorityLevel: "exempt", Exempt: true},
			Unknown: []string{
				"the write rate: a dry-run write needs update rights on widgets.example.com",
				"etcd's size: the API server's metrics could not be read (forbidden)",
			},
		}},
		{"budget/reject-hours.txt", &migrate.Budget{
			CRD: "reports.example.com", Version: "v1", Objects: 2000000,
			AverageBytes: 3 << 10, SampleObjects: 200, WriteBytes: 2000000 * 3 << 10,
			RatePerSecond: 120, RateSample: 200, RateInFlight: 16, Seconds: 2000000 / 120.0,
			StorageBytes: 3 << 30,
			FlowControl:  &migrate.FlowControl{FlowSchema: "batch", PriorityLevel: "batch-reject", NominalSeats: 4, LimitResponse: "Reject"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printBudget(&b, tc.b, "")
			goldenfile.Check(t, tc.name, b.String())
		})
	}
	var b bytes.Buffer
	printBudget(&b, nil, "  ")
	if b.Len() != 0 {
		t.Errorf("no budget (a rewrite of fewer than %d objects) printed %q", migrate.MinBudgetObjects, b.String())
	}
}
