package markdown

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/plan"
)

func writeString(b *bytes.Buffer, s string) error {
	b.WriteString(s)
	return nil
}

// bigPlan is a breaking plan of one CRD whose n objects each have a finding.
func bigPlan(n int) *plan.Report {
	it := plan.Item{CRD: "widgets.example.com", Operation: plan.OperationUpdate, Verdict: plan.VerdictBreaking, Breaking: true,
		Apply: plan.Apply{Allowed: true}, BreakingReasons: []string{fmt.Sprintf("%d objects lose data on read", n)}}
	it.StorageVersion = plan.StorageChange{Before: "v1", After: "v2"}
	it.Objects.Total, it.Objects.Evaluated = int64(n), int64(n)
	for i := 0; i < n; i++ {
		it.Objects.Findings = append(it.Objects.Findings, plan.Finding{Namespace: "default", Name: fmt.Sprintf("widget-%05d", i), PrunedOnRead: []string{"spec.size", "spec.color"}})
	}
	r := &plan.Report{Items: []plan.Item{it}}
	r.Summarize()
	return r
}

// TestMarkdownCap: a plan too long for one comment is cut to GitHub's limit: the verdict and
// the reasons stay, the findings table stops, every <details> is closed, and the comment says
// how many lines were cut.
func TestMarkdownCap(t *testing.T) {
	for _, n := range []int{10, 5000} {
		var b bytes.Buffer
		if err := writeString(&b, Plan(bigPlan(n), 0)); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if len(out) > Limit {
			t.Errorf("%d findings: %d bytes, over the %d limit", n, len(out), Limit)
		}
		if !strings.HasPrefix(out, "## kubectl crdver plan: **breaking**") {
			t.Errorf("%d findings: the verdict is not first:\n%.200s", n, out)
		}
		if w := fmt.Sprintf("%d objects lose data on read", n); !strings.Contains(out, w) {
			t.Errorf("the comment lacks %q", w)
		}
		if o, c := strings.Count(out, "<details>"), strings.Count(out, "</details>"); o != c || o == 0 {
			t.Errorf("%d findings: %d <details> and %d </details>", n, o, c)
		}
		rows := strings.Count(out, "| pruned on read |")
		cut := strings.Contains(out, "lines cut to keep this comment within GitHub's 65,536-character limit")
		switch {
		case n == 10 && (rows != 20 || cut):
			t.Errorf("10 findings: %d rows (want 20), cut note %v", rows, cut)
		case n == 5000 && (rows >= 10000 || !cut):
			t.Errorf("5000 findings: %d rows, cut note %v; want fewer than 10000 and the note", rows, cut)
		}
		if n == 5000 {
			var shown int
			fmt.Sscanf(out[strings.LastIndex(out, "\n_")+2:], "%d", &shown)
			if shown+rows < 10000 {
				t.Errorf("5000 findings: %d rows shown + %d cut < 10000 rows", rows, shown)
			}
		}
	}
}

// TestMarkdownRendersEveryFindingKind: every list of an object's finding and every *Reasons
// list of a plan item appears in the comment, found by reflection over the report's types: a
// kind added to the report is printed without a change to the printer (and this test covers
// it without a change either).
func TestMarkdownRendersEveryFindingKind(t *testing.T) {
	it := plan.Item{CRD: "x.example.com", Operation: plan.OperationUpdate, Verdict: plan.VerdictBreaking, Apply: plan.Apply{Allowed: true}}
	f := plan.Finding{Name: "obj"}
	var want []string
	fill := func(v reflect.Value, keep func(string) bool) {
		for i := 0; i < v.NumField(); i++ {
			field := v.Type().Field(i)
			key, _, _ := strings.Cut(field.Tag.Get("json"), ",")
			if !field.IsExported() || field.Type.Kind() != reflect.Slice || field.Type.Elem().Kind() != reflect.String || !keep(key) {
				continue
			}
			marker := "marker-" + key
			s := reflect.MakeSlice(field.Type, 1, 1)
			s.Index(0).SetString(marker)
			v.Field(i).Set(s)
			want = append(want, marker)
		}
	}
	fill(reflect.ValueOf(&it).Elem(), func(k string) bool { return strings.HasSuffix(k, "Reasons") })
	fill(reflect.ValueOf(&f).Elem(), func(k string) bool { return k != "kinds" })
	it.Objects.Findings = []plan.Finding{f}
	r := &plan.Report{Items: []plan.Item{it}}
	r.Summarize()
	var b bytes.Buffer
	if err := writeString(&b, Plan(r, 0)); err != nil {
		t.Fatal(err)
	}
	if len(want) < 6 {
		t.Fatalf("found %d lists to fill, want the reasons and the finding kinds", len(want))
	}
	for _, w := range want {
		if !strings.Contains(b.String(), w) {
			t.Errorf("the comment lacks %q:\n%s", w, b.String())
		}
	}
}

// The stricter changes of a CRD compared at two live versions (v1 with v1, and v1beta1 with
// v1) are labelled as the table labels them: the same path twice reads as two changes, not one
// repeated (issue 39: both were labelled v1).
func TestMarkdownLabelsStricterChangesByVersions(t *testing.T) {
	changes := []plan.SchemaChange{
		{Version: "v1", Path: "spec.replicas", Change: "maximum 10 added", Effect: plan.EffectStricter},
		{Version: "v1", From: "v1beta1", Path: "spec.replicas", Change: "maximum 10 added", Effect: plan.EffectStricter},
	}
	it := plan.Item{CRD: "x.example.com", Operation: plan.OperationUpdate, Verdict: plan.VerdictStricter, Apply: plan.Apply{Allowed: true}, Stricter: changes}
	r := &plan.Report{Items: []plan.Item{it}}
	r.Summarize()
	var b bytes.Buffer
	if err := writeString(&b, Plan(r, 0)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- **stricter:** v1 `spec.replicas`", "- **stricter:** v1beta1 → v1 `spec.replicas`"} {
		if strings.Count(b.String(), want) != 1 {
			t.Errorf("want %q once:\n%s", want, b.String())
		}
	}
}
