package plugin

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"

	"github.com/crdver/kubectl-crdver/outcome"
)

// exitDeciders are plugin's ways of choosing an exit code: a command whose library fills an
// outcome.Outcome calls none of them once its library ran; it ends with end(out, words).
var exitDeciders = map[string]bool{"ProblemsFound": true, "Unavailable": true, "Usage": true, "UsageErrorf": true, "clusterError": true, "Interrupted": true}

// The code that ends each command after its library ran, by file: "Type.method" or "func".
var endsOfRuns = map[string][]string{
	"migrate.go":       {"MigrateOptions.migrateOutcome", "migrateError", "checkpointAdvice"},
	"migrate_all.go":   {"MigrateOptions.runAll", "MigrateOptions.allError"},
	"retire.go":        {"RetireOptions.Run", "RetireOptions.runError"},
	"plan.go":          {"PlanOptions.Run"},
	"upgrade.go":       {"UpgradeOptions.finish"},
	"restore.go":       {"RestoreOptions.finish", "RestoreOptions.runError"},
	"convert.go":       {"ConvertOptions.Run", "ConvertOptions.convert"},
	"convert_write.go": {"ConvertOptions.runWrite", "interruptedWrite"},
	"convert_load.go":  {"ConvertOptions.runLoad", "webhookUnreachable"},
	"path.go":          {"PlanOptions.runPath", "UpgradeOptions.runPath"},
}

// One home for how a run ends: for migrate, migrate --all, retire, plan, upgrade, restore and
// convert (with --write, --check, --load) the exit code is the library's Outcome
// (migrate.Report, migrate.AllReport, retire.Result, plan.Report.Outcome, upgrade.Report,
// restore.Options.Ended, convert's reports' Ended); plugin words errors with its flags but
// decides no exit code of its own after the library ran, and end exits with the outcome's code.
func TestOneHomeForTheExitCode(t *testing.T) {
	fset := token.NewFileSet()
	for file, funcs := range endsOfRuns {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil {
				if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
					name = star.X.(*ast.Ident).Name + "." + name
				}
			}
			want := false
			for _, fn := range funcs {
				want = want || fn == name
			}
			if !want {
				continue
			}
			found[name] = true
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.CallExpr:
					if id, ok := x.Fun.(*ast.Ident); ok && exitDeciders[id.Name] {
						t.Errorf("%s: %s decides an exit code (%s): end with the library's outcome (end(out, words))", fset.Position(x.Pos()), name, id.Name)
					}
				case *ast.CompositeLit:
					if id, ok := x.Type.(*ast.Ident); ok && id.Name == "ExitError" {
						t.Errorf("%s: %s builds an ExitError: end with the library's outcome", fset.Position(x.Pos()), name)
					}
				}
				return true
			})
		}
		for _, fn := range funcs {
			if !found[fn] {
				t.Errorf("%s: no %s (renamed? update endsOfRuns)", file, fn)
			}
		}
	}
	// end exits with the outcome's code, whatever words it is given.
	for _, k := range []outcome.Kind{outcome.OK, outcome.Findings, outcome.Usage, outcome.Incomplete} {
		out := outcome.New(k, "the last line")
		for _, words := range []error{nil, Usage(errWords("a usage error's words"))} {
			if got := ExitCode(end(out, words)); got != k.ExitCode() {
				t.Errorf("end(%s, %v): exit %d, want %d", k, words, got, k.ExitCode())
			}
		}
	}
	if err := end(outcome.New(outcome.Findings, "the last line"), nil); err == nil || ErrorLine(err) != "error: the last line" {
		t.Errorf("end prints %v, want the outcome's line", err)
	}
}

type errWords string

func (e errWords) Error() string { return string(e) }
