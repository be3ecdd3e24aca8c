package plan

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A later plan with the memo of an earlier one (upgrade's verify) does not evaluate again the
// objects the earlier one found clean and that have not changed, and answers exactly as a
// plan without the memo; an object changed since is evaluated again, and its finding appears.
// Its records leave nothing in the temporary folder, even before Close (a killed process).
func TestPlanMemo(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	live := readCRD(t, filepath.Join("testdata", "widgets-old.yaml"))
	next := readCRD(t, filepath.Join("testdata", "widgets-new.yaml"))
	objs := readObjects(t, filepath.Join("testdata", "widgets-objects.yaml"))
	// More objects with nothing to say, then the API server's order (by key).
	for _, name := range []string{"fine-2", "fine-3", "a-fine"} {
		c := *objs[slicesIndexName(objs, "fine")].DeepCopy()
		c.SetName(name)
		objs = append(objs, c)
	}
	sort.Slice(objs, func(i, j int) bool { return objectKey(&objs[i]) < objectKey(&objs[j]) })
	plan := func(objs []unstructured.Unstructured, memo *ObjectMemo) *Item {
		t.Helper()
		it, err := Plan(context.Background(), live, next, &SliceSource{Objects: objs, PageSize: 3}, Options{Workers: 2, Memo: memo})
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	memo, err := NewObjectMemo()
	if err != nil {
		t.Fatal(err)
	}
	first := plan(objs, memo)
	clean := first.Objects.Evaluated - int64(len(first.Objects.Findings))
	if clean < 2 || len(first.Objects.Findings) == 0 {
		t.Fatalf("the fixture should have clean objects and findings: %d evaluated, %d findings", first.Objects.Evaluated, len(first.Objects.Findings))
	}
	if memo.Reused.Load() != 0 {
		t.Errorf("the first plan reused %d", memo.Reused.Load())
	}

	// Unchanged objects (new resourceVersions and managedFields, as after a rewrite).
	rewritten := make([]unstructured.Unstructured, len(objs))
	for i := range objs {
		rewritten[i] = *objs[i].DeepCopy()
		rewritten[i].SetResourceVersion("999")
		rewritten[i].SetGeneration(7)
	}
	again := plan(rewritten, memo)
	if got := memo.Reused.Load(); got != clean {
		t.Errorf("reused %d objects, want the %d found clean", got, clean)
	}
	without := plan(rewritten, nil)
	if !reflect.DeepEqual(again.Objects, without.Objects) || !reflect.DeepEqual(again.Kinds, without.Kinds) || again.Verdict != without.Verdict {
		t.Errorf("with the memo the plan answers otherwise:\n%+v\nwithout:\n%+v", again.Objects, without.Objects)
	}

	// One clean object changed since the first plan: evaluated again, and its finding shows.
	memo2, err := NewObjectMemo()
	if err != nil {
		t.Fatal(err)
	}
	plan(objs, memo2)
	changed := make([]unstructured.Unstructured, len(objs))
	for i := range objs {
		changed[i] = *objs[i].DeepCopy()
	}
	i := slicesIndexName(changed, "fine")
	if i < 0 {
		t.Fatal("no object named fine")
	}
	if err := unstructured.SetNestedField(changed[i].Object, int64(1000), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	after := plan(changed, memo2)
	if got := memo2.Reused.Load(); got != clean-1 {
		t.Errorf("reused %d objects, want %d (all clean ones but the changed one)", got, clean-1)
	}
	if f := findingOf(after, "fine"); f == nil || len(f.CreateErrors) == 0 {
		t.Errorf("the changed object is not evaluated again: %+v", f)
	}

	if left, _ := os.ReadDir(tmp); runtime.GOOS != "windows" && len(left) != 0 {
		t.Errorf("the memo's records are files in %s while it is open (a killed process leaves them): %v", tmp, left)
	}
	if err := memo.Close(); err != nil {
		t.Fatal(err)
	}
	if err := memo2.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("Close left %v in %s", left, tmp)
	}
}

func slicesIndexName(objs []unstructured.Unstructured, name string) int {
	for i := range objs {
		if objs[i].GetName() == name {
			return i
		}
	}
	return -1
}
