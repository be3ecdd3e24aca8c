package plugin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/printers"
)

func TestToPrinter(t *testing.T) {
	plan := &migrate.Plan{CRD: "things.example.com", StorageVersion: "v1", TargetVersion: "v1", StoredVersions: []string{"v1"}, Steps: []string{"rewrite 0 objects"}}
	for _, tc := range []struct {
		format   string
		wantErr  string
		wantPart string // what PrintPart(plan) writes ("" = nothing)
	}{
		{"", "", "Plan for things.example.com"},
		{"json", "", ""},
		{"yaml", "", ""},
		{"wide", `--output "wide" is not supported: use one of json, yaml`, ""},
	} {
		t.Run(tc.format, func(t *testing.T) {
			f := &outputFlags{format: tc.format, allowed: []string{outputJSON, outputYAML}}
			p, err := f.toPrinter(humanOptions{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || ExitCode(err) != ExitUsage {
					t.Fatalf("err = %v, want exit 2 with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var part bytes.Buffer
			if err := p.PrintPart(&part, printers.MigratePlan(plan)); err != nil {
				t.Fatal(err)
			}
			if (tc.wantPart == "") != (part.Len() == 0) || !strings.Contains(part.String(), tc.wantPart) {
				t.Errorf("PrintPart wrote %q, want %q", part.String(), tc.wantPart)
			}
			var whole bytes.Buffer
			if err := p.PrintReport(&whole, migrateView(&migrate.Report{Plan: plan, DryRun: true})); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"": "Dry run: nothing was written.", "json": `"dryRun": true`, "yaml": "dryRun: true"}[tc.format]
			if !strings.Contains(whole.String(), want) {
				t.Errorf("PrintReport wrote %q, want %q in it", whole.String(), want)
			}
		})
	}
	// A report without a printer does not compile; one without a pull request comment is
	// refused by -o markdown (only the commands whose reports have one offer it).
	if err := (markdownPrinter{}).PrintReport(&bytes.Buffer{}, printers.MigratePlan(plan)); err == nil {
		t.Error("-o markdown printed a report that has no pull request comment")
	}
}
