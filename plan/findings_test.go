package plan

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A plan lists at most MaxFindings findings, and judges by all of them: the verdict, its
// reasons, the kinds and the runbook's counts are those of the plan that lists every one.
func TestPlanListsFirstFindingsCountsAll(t *testing.T) {
	live := readCRD(t, filepath.Join("testdata", "widgets-old.yaml"))
	next := readCRD(t, filepath.Join("testdata", "widgets-new.yaml"))
	base := readObjects(t, filepath.Join("testdata", "widgets-objects.yaml"))
	// 25 copies of each object but "fine": 150 objects with findings of every kind the
	// fixture has (data loss, a rejected write, invalid on re-create, defaults).
	var objs []unstructured.Unstructured
	for i := 0; i < 25; i++ {
		for _, o := range base {
			if o.GetName() == "fine" {
				continue
			}
			c := o.DeepCopy()
			c.SetName(fmt.Sprintf("%s-%02d", o.GetName(), i))
			objs = append(objs, *c)
		}
	}
	plan := func(max int) *Item {
		it, err := Plan(context.Background(), live, next, &SliceSource{Objects: objs, PageSize: 40}, Options{Workers: 2, MaxFindings: max})
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	all, capped := plan(len(objs)), plan(7)
	if len(all.Objects.Findings) != len(objs) || all.Objects.Omitted != 0 {
		t.Fatalf("uncapped: %d findings, %d omitted; want %d, 0", len(all.Objects.Findings), all.Objects.Omitted, len(objs))
	}
	if len(capped.Objects.Findings) != 7 || capped.Objects.Omitted != int64(len(objs)-7) {
		t.Fatalf("capped: %d findings, %d omitted; want 7, %d", len(capped.Objects.Findings), capped.Objects.Omitted, len(objs)-7)
	}
	if diff := cmp.Diff(all.Objects.Findings[:7], capped.Objects.Findings); diff != "" {
		t.Errorf("the capped plan does not list the first findings (-all +capped):\n%s", diff)
	}
	if !strings.Contains(strings.Join(capped.BreakingReasons, "\n"), "25 objects lose fields") {
		t.Errorf("reasons do not count every object: %q", capped.BreakingReasons)
	}
	type judged struct {
		Verdict                                            string
		Breaking                                           bool
		Kinds                                              []Kind
		BreakingReasons, UnknownReasons, InvalidOnRecreate []string
	}
	j := func(it *Item) judged {
		return judged{it.Verdict, it.Breaking, it.Kinds, it.BreakingReasons, it.UnknownReasons, it.InvalidOnRecreateReasons}
	}
	if diff := cmp.Diff(j(all), j(capped)); diff != "" {
		t.Errorf("the capped plan judges otherwise (-all +capped):\n%s", diff)
	}
	// The runbook: the same steps, saying the same; the lists of objects name the first ones
	// and count the rest.
	ra, rc := Runbook([]Item{*all}, RunbookOptions{}), Runbook([]Item{*capped}, RunbookOptions{})
	if len(ra) != len(rc) {
		t.Fatalf("runbooks of %d and %d steps", len(ra), len(rc))
	}
	for i := range ra {
		if ra[i].Action != rc[i].Action || ra[i].Why != rc[i].Why {
			t.Errorf("step %d: %s %q\nwhile the uncapped plan's says: %s %q", i+1, rc[i].Action, rc[i].Why, ra[i].Action, ra[i].Why)
		}
		if n := len(rc[i].Objects); n > 0 && len(ra[i].Objects) > n {
			last := rc[i].Objects[n-1]
			if !strings.HasPrefix(last, "… and ") || !strings.Contains(last, "the counts are of all") {
				t.Errorf("step %d (%s) lists %q last; want how many more there are", i+1, rc[i].Action, last)
			}
		}
	}
}
