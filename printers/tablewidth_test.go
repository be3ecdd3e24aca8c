package printers

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/crdver/kubectl-crdver/doctor"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/retire"
)

// The default tables of doctor, migrate --all and retire fit 120 columns with long findings,
// steps and notes (the measured widths were 229, 264 and 131), the text wrapped, none lost;
// -o wide prints each on one line; doctor and migrate --all put what needs attention first.
func TestTablesFit120Columns(t *testing.T) {
	long := "migration pending: status.storedVersions is [v1alpha1, v1] but the storage version is v1; objects may still be stored at the older versions, so read them at every version before removing one"
	doc := &doctor.Report{Items: []doctor.Item{
		{CRD: "settings.demo.example.com"},
		{CRD: "databases.demo.example.com", Findings: []doctor.Finding{{Check: "storage", Severity: doctor.SeverityWarning, Message: long, Fix: "kubectl crdver migrate databases.demo.example.com"}}},
		{CRD: "backups.ops.example.com", Findings: []doctor.Finding{{Check: "webhook", Severity: doctor.SeverityError, Message: "webhook is down: " + long}}},
	}}
	plans := []*migrate.Plan{{CRD: "gadgets.example.com", StorageVersion: "v1", StoredVersions: []string{"v1beta1", "v1"}, Objects: 20,
		Steps: []string{"if every object is accounted for, set status.storedVersions from [v1beta1 v1] to [v1] and say which versions can then be removed"}}}
	items := []migrate.AllItem{
		{CRD: "gadgets.example.com", Outcome: migrate.OutcomeDone, Result: &migrate.Result{}},
		{CRD: "gizmos.example.com", Outcome: migrate.OutcomeInterrupted, Error: "interrupted after 3 objects; progress saved in /home/someone/.cache/kubectl-crdver/migrate/gizmos.example.com-0123456789ab.json"},
	}
	rp := &retire.Plan{CRD: "crontabs.stable.example.com", Version: "v1beta1", Target: "v1", StorageVersion: "v1", Steps: []retire.Step{
		{Name: retire.StepTrim, State: retire.StateRefused, Detail: long},
	}}
	for _, wide := range []bool{false, true} {
		var b bytes.Buffer
		if err := printDoctorReport(&b, doc, wide, false); err != nil {
			t.Fatal(err)
		}
		if err := AllPlan(&b, plans, 3, 20, wide, false); err != nil {
			t.Fatal(err)
		}
		if err := AllSummary(&b, items, wide, false); err != nil {
			t.Fatal(err)
		}
		if err := printRetirePlan(&b, rp, wide, false); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		widest := 0
		for _, l := range strings.Split(out, "\n") {
			widest = max(widest, utf8.RuneCountInString(l))
		}
		if !wide && widest > 120 {
			t.Errorf("a line of %d columns:\n%s", widest, out)
		}
		if wide && widest <= 120 {
			t.Errorf("-o wide wrapped the text (widest line %d):\n%s", widest, out)
		}
		flat := strings.Join(strings.Fields(out), " ")
		for _, want := range []string{long, "gizmos.example.com-0123456789ab.json", "[v1beta1 v1] to [v1] and say which versions can then be removed"} {
			if !strings.Contains(flat, want) {
				t.Errorf("wide=%v: text lost: %q\n%s", wide, want, out)
			}
		}
		if i, j := strings.Index(out, "backups.ops"), strings.Index(out, "settings.demo"); i > j {
			t.Errorf("wide=%v: doctor lists a CRD without findings before one with an error:\n%s", wide, out)
		}
		if i, j := strings.Index(out, " interrupted "), strings.Index(out, " done "); i < 0 || j < 0 || i > j {
			t.Errorf("wide=%v: migrate --all summary does not put the interrupted CRD first:\n%s", wide, out)
		}
	}
}
