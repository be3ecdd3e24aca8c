package printers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/restore"
)

func convertStreamReport() *convert.Report {
	r := &convert.Report{CRD: "crontabs.stable.example.com", Strategy: "None", To: "v1", RoundTrip: true, Objects: 3, Converted: 1, FailedObjects: 2,
		Notes:  []string{"a note"},
		Checks: []convert.CheckCount{{Name: convert.CheckPruned, Passed: 1, Failed: 2}},
		Added:  []convert.Change{{Object: "a.yaml (document 3)", Direction: "v1beta1 -> v1 -> v1beta1", Path: ".status", Kind: "added", Detail: "added: {}"}}}
	for i := 1; i <= 2; i++ {
		r.Findings = append(r.Findings, convert.Finding{Object: fmt.Sprintf("a.yaml (document %d)", i), Direction: "v1beta1 -> v1", Check: convert.CheckPruned, Severity: convert.SeverityError, Path: ".spec.hostPort", Detail: "pruned"})
	}
	return r
}

// TestConvertStreamIsTheReport: the report written a page at a time is the report: as JSON
// and YAML the same data as Data prints (its fields in another order), for people the same
// text as the whole report's printer when it comes as one page.
func TestConvertStreamIsTheReport(t *testing.T) {
	whole := convertStreamReport()
	for _, tc := range []struct {
		name string
		p    ReportPrinter
	}{{"json", Data{}}, {"yaml", Data{YAML: true}}, {"human", Human{}}, {"no findings", Data{}}} {
		t.Run(tc.name, func(t *testing.T) {
			r := *whole
			if tc.name == "no findings" {
				r.Findings = []convert.Finding{}
			}
			var want, got bytes.Buffer
			if err := tc.p.PrintReport(&want, Convert(&r)); err != nil {
				t.Fatal(err)
			}
			s := NewConvertStream(&got, tc.p)
			rest := r
			rest.Findings = []convert.Finding{}
			for _, f := range r.Findings { // a page per finding
				if err := s.Page(convert.PageResult{Report: &rest, Findings: []convert.Finding{f}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Finish(&rest); err != nil {
				t.Fatal(err)
			}
			if tc.name == "human" {
				// Pages after the first print their rows without the header, in a table of their
				// own: compare the words.
				if d := cmp.Diff(strings.Fields(want.String()), strings.Fields(got.String())); d != "" {
					t.Errorf("human output (-whole +streamed):\n%s", d)
				}
				return
			}
			sameData(t, want.Bytes(), got.Bytes(), tc.p.(Data).YAML)
		})
	}
}

// TestRestoreStreamIsTheReport: the same for restore's outcomes.
func TestRestoreStreamIsTheReport(t *testing.T) {
	for _, p := range []Data{{}, {YAML: true}} {
		whole := restoreReport(true)
		var want, got bytes.Buffer
		if err := p.PrintReport(&want, Restore(whole)); err != nil {
			t.Fatal(err)
		}
		s := NewRestoreStream(&got, p)
		rest := *whole
		rest.Objects = nil
		for _, o := range whole.Objects {
			if err := s.Outcome(&rest, o); err != nil {
				t.Fatal(err)
			}
		}
		rest.Objects = []restore.Outcome{}
		if err := s.Finish(&rest); err != nil {
			t.Fatal(err)
		}
		sameData(t, want.Bytes(), got.Bytes(), p.YAML)
	}
	// For people, in chunks of 2 rows: the rows of every chunk, one header, the sections and
	// the counts.
	whole := restoreReport(false)
	var got bytes.Buffer
	s := NewRestoreStream(&got, Human{})
	s.chunk = 2
	rest := *whole
	rest.Objects, rest.Documents = nil, len(whole.Objects)
	for _, o := range whole.Objects {
		if err := s.Outcome(&rest, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(&rest); err != nil {
		t.Fatal(err)
	}
	out := got.String()
	for _, want := range []string{"widget default/w-lost", "widget default/w-changed", "widget default/w-deleted", "gadget default/g-lost", "Fields no served version holds", "of 5 backup documents."} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "OBJECT"); n != 1 || strings.Contains(out, "w-same") {
		t.Errorf("%d headers (want 1), unchanged objects listed: %v\n%s", n, strings.Contains(out, "w-same"), out)
	}
}

// sameData: want and got are one JSON (or YAML) document each, holding the same data.
func sameData(t *testing.T, want, got []byte, asYAML bool) {
	t.Helper()
	if asYAML {
		var err error
		if want, err = yaml.YAMLToJSON(want); err != nil {
			t.Fatal(err)
		}
		if got, err = yaml.YAMLToJSON(got); err != nil {
			t.Fatalf("%v:\n%s", err, got)
		}
	}
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(got))
	if err := dec.Decode(&g); err != nil || dec.More() {
		t.Fatalf("not one document (%v):\n%s", err, got)
	}
	if d := cmp.Diff(w, g); d != "" {
		t.Errorf("data (-whole +streamed):\n%s", d)
	}
}

// markdownOnly prints reports as their Markdown (the command's -o markdown).
type markdownOnly struct{}

func (markdownOnly) PrintPart(io.Writer, Report) error { return nil }
func (markdownOnly) PrintReport(w io.Writer, r Report) error {
	_, err := io.WriteString(w, r.(MarkdownReport).Markdown(0))
	return err
}

// TestConvertWriteStreamIsTheReport: the report of --write given a file at a time is the
// report: as JSON and YAML the same data as Data prints, as Markdown the same comment (the
// diffs, which it does not show, are not kept), for people the same text as the whole
// report's printer.
func TestConvertWriteStreamIsTheReport(t *testing.T) {
	whole := convertWriteAddedReport()
	whole.Files = append(whole.Files,
		convert.FileResult{Path: "b.yaml", Status: convert.FileNotProven, Objects: []convert.ObjectResult{{Document: 2, Line: 5, Kind: "Cluster", Name: "capi/c-2", From: "v1beta1", To: "v1beta2", Served: convert.VersionServed,
			Problems: []convert.Finding{{Object: "b.yaml:5", Check: convert.CheckPruned, Path: ".spec.x", Detail: "pruned"}}}}},
		convert.FileResult{Path: "chart/t.yaml", Status: convert.FileTemplate, Reason: "Go template", Lines: []string{"2: apiVersion: cluster.x-k8s.io/v1beta1"}})
	whole.Files[0].Diff = "--- a/clusters.yaml\n+++ b/clusters.yaml\n@@ -1 +1 @@\n-apiVersion: cluster.x-k8s.io/v1beta1\n+apiVersion: cluster.x-k8s.io/v1beta2\n"
	for _, tc := range []struct {
		name string
		p    ReportPrinter
	}{{"json", Data{}}, {"yaml", Data{YAML: true}}, {"markdown", markdownOnly{}}, {"human", Human{}}} {
		t.Run(tc.name, func(t *testing.T) {
			var want, got bytes.Buffer
			if err := tc.p.PrintReport(&want, ConvertWrite(whole)); err != nil {
				t.Fatal(err)
			}
			s := NewConvertWriteStream(&got, tc.p)
			rest := *whole
			rest.Files = nil
			for _, f := range whole.Files {
				if err := s.File(&rest, f); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Finish(&rest); err != nil {
				t.Fatal(err)
			}
			switch tc.name {
			case "json", "yaml":
				sameData(t, want.Bytes(), got.Bytes(), tc.p.(Data).YAML)
			default:
				if want.String() != got.String() {
					t.Errorf("-whole +streamed:\n%s", cmp.Diff(want.String(), got.String()))
				}
			}
			if tc.name == "human" {
				// Each file's rows, then its details; the counts last; one header.
				out := got.String()
				row := regexp.MustCompile(`b\.yaml +5 +Cluster`).FindStringIndex(out)
				if strings.Count(out, "FILE") != 1 || row == nil || row[0] > strings.Index(out, "b.yaml:5 capi/c-2: pruned-fields .spec.x: pruned") ||
					strings.Index(out, "+apiVersion") > row[0] || !strings.HasSuffix(out, "0 already at v1beta2, 1 converted\n") {
					t.Errorf("not a file at a time, the counts last:\n%s", out)
				}
			}
		})
	}
}

// TestConvertWriteRowsInChunks: a file of 2,500 objects, whose rows are printed 1,000 at a
// time (its longest name in the last chunk), is the one table of all its rows.
func TestConvertWriteRowsInChunks(t *testing.T) {
	f := convert.FileResult{Path: "big.yaml", Status: convert.FileWritten}
	want := &Table{Header: writeHeader()}
	for i := range 2500 {
		name := fmt.Sprintf("default/ct-%d", i)
		if i == 2400 {
			name += "-with-a-longer-name"
		}
		f.Objects = append(f.Objects, convert.ObjectResult{Document: i + 1, Line: 10*i + 1, Kind: "CronTab", Name: name, From: "v1beta1", To: "v1", Served: convert.VersionServed})
		want.Add("big.yaml", fmt.Sprint(10*i+1), "CronTab", name, "v1beta1", "v1", convert.FileWritten)
	}
	var w, got bytes.Buffer
	if err := want.Print(&w, false); err != nil {
		t.Fatal(err)
	}
	s := NewConvertWriteStream(&got, Human{})
	if err := s.File(&convert.WriteReport{}, f); err != nil {
		t.Fatal(err)
	}
	if got.String() != w.String() {
		t.Errorf("-one table +in chunks:\n%s", cmp.Diff(w.String(), got.String()))
	}
}

// TestYAMLItemWriter: YAML written to a yamlItemWriter in pieces of any size (a line cut
// anywhere, a block scalar's empty lines) is the same list item as written whole.
func TestYAMLItemWriter(t *testing.T) {
	v := map[string]any{"diff": "--- a\n+++ b\n\n@@ -1 +1 @@\n-x\n+y\n", "objects": []map[string]any{{"name": "a", "problems": []string{"p"}}, {"name": "b"}}, "path": "f.yaml"}
	const want = "- diff: |\n    --- a\n    +++ b\n\n    @@ -1 +1 @@\n    -x\n    +y\n  objects:\n  - name: a\n    problems:\n    - p\n  - name: b\n  path: f.yaml\n"
	var whole bytes.Buffer
	if err := writeYAMLItem(&whole, v); err != nil {
		t.Fatal(err)
	}
	if whole.String() != want {
		t.Errorf("writeYAMLItem:\n%s\nwant:\n%s", whole.String(), want)
	}
	y, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 2, 7, len(y)} {
		var got bytes.Buffer
		iw := &yamlItemWriter{w: &got}
		for rest := y; len(rest) > 0; {
			n := min(size, len(rest))
			if _, err := iw.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if got.String() != want {
			t.Errorf("written %d bytes at a time:\n%s\nwant:\n%s", size, got.String(), want)
		}
	}
}
