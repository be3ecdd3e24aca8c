package convert

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiff(t *testing.T) {
	cases := []struct {
		name      string
		want, got map[string]any
		diffs     []Difference
	}{
		{"equal, numbers by value", map[string]any{"a": int64(1), "b": []any{"x"}}, map[string]any{"a": 1.0, "b": []any{"x"}}, nil},
		{"lost and added", map[string]any{"spec": map[string]any{"port": "80"}}, map[string]any{"spec": map[string]any{"host": ""}}, []Difference{
			{Path: ".spec.host", Kind: DiffAdded, Detail: `added: "" appeared after the round trip`},
			{Path: ".spec.port", Kind: DiffLost, Detail: `lost: was "80", missing after the round trip`},
		}},
		{"changed type", map[string]any{"a": "1"}, map[string]any{"a": int64(1)}, []Difference{{Path: ".a", Kind: DiffChanged, Detail: `changed: "1" became 1`}}},
		{"lists", map[string]any{"l": []any{"a", "b"}}, map[string]any{"l": []any{"a"}}, []Difference{{Path: ".l", Kind: DiffListLength, Detail: "list length 2 became 1"}}},
		{"list items", map[string]any{"l": []any{map[string]any{"k": "a"}}}, map[string]any{"l": []any{map[string]any{"k": "b"}}}, []Difference{{Path: ".l[0].k", Kind: DiffChanged, Detail: `changed: "a" became "b"`}}},
		{"keys that are not identifiers", map[string]any{"metadata": map[string]any{"labels": map[string]any{"app.kubernetes.io/name": "x"}}}, map[string]any{"metadata": map[string]any{"labels": map[string]any{}}},
			[]Difference{{Path: `.metadata.labels["app.kubernetes.io/name"]`, Kind: DiffLost, Detail: `lost: was "x", missing after the round trip`}}},
		{"null versus missing", map[string]any{"a": nil}, map[string]any{}, []Difference{{Path: ".a", Kind: DiffLost, Detail: "lost: was null, missing after the round trip"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.diffs, Diff(tc.want, tc.got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// spec is {spec: {k: v, …}} of the key/value pairs kv.
func spec(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return map[string]any{"spec": m}
}

// TestDiffLossRule pins the loss rule every loss check shares (Difference.Loss, Losses): what
// a round trip adds or normalises is reported and is no loss; a removal, a changed value or
// type and a list of another length are losses, at any depth.
func TestDiffLossRule(t *testing.T) {
	cases := []struct {
		name      string
		want, got map[string]any
		kinds     map[string]string // path -> kind
		losses    []string
	}{
		{"addition (an annotation the conversion keeps its data in)",
			map[string]any{"metadata": map[string]any{"name": "a"}},
			map[string]any{"metadata": map[string]any{"name": "a", "annotations": map[string]any{"cluster.x-k8s.io/conversion-data": "{}"}}},
			map[string]string{".metadata.annotations": DiffAdded}, nil},
		{"addition (a zero status)", spec(), map[string]any{"spec": map[string]any{}, "status": map[string]any{}},
			map[string]string{".status": DiffAdded}, nil},
		{"addition (a defaulted field of a reference)", spec("ref", map[string]any{"name": "x"}), spec("ref", map[string]any{"name": "x", "namespace": "default"}),
			map[string]string{".spec.ref.namespace": DiffAdded}, nil},
		{"normalised duration", spec("timeout", "5m"), spec("timeout", "5m0s"),
			map[string]string{".spec.timeout": DiffNormalised}, nil},
		{"normalised duration in hours", spec("timeout", "1h30m"), spec("timeout", "90m0s"),
			map[string]string{".spec.timeout": DiffNormalised}, nil},
		{"normalised quantity", spec("memory", "1Gi"), spec("memory", "1073741824"),
			map[string]string{".spec.memory": DiffNormalised}, nil},
		{"normalised quantity (milli)", spec("cpu", "0.5"), spec("cpu", "500m"),
			map[string]string{".spec.cpu": DiffNormalised}, nil},
		{"a different duration is a change", spec("timeout", "5m"), spec("timeout", "6m0s"),
			map[string]string{".spec.timeout": DiffChanged}, []string{".spec.timeout"}},
		{"a different quantity is a change", spec("memory", "1Gi"), spec("memory", "1G"),
			map[string]string{".spec.memory": DiffChanged}, []string{".spec.memory"}},
		{"a string that is no duration or quantity is a change", spec("mode", "Fast"), spec("mode", "fast"),
			map[string]string{".spec.mode": DiffChanged}, []string{".spec.mode"}},
		{"a duration that became a number is a type change", spec("timeout", "300s"), spec("timeout", int64(300)),
			map[string]string{".spec.timeout": DiffChanged}, []string{".spec.timeout"}},
		{"removal", spec("a", "x", "b", "y"), spec("a", "x"),
			map[string]string{".spec.b": DiffLost}, []string{".spec.b"}},
		{"nested list element: one field added, one normalised, one lost",
			spec("items", []any{map[string]any{"name": "a"}, map[string]any{"name": "b", "after": "10s", "keep": true}}),
			spec("items", []any{map[string]any{"name": "a", "weight": int64(1)}, map[string]any{"name": "b", "after": "10000ms"}}),
			map[string]string{".spec.items[0].weight": DiffAdded, ".spec.items[1].after": DiffNormalised, ".spec.items[1].keep": DiffLost},
			[]string{".spec.items[1].keep"}},
		{"list shortened", spec("l", []any{"a", "b"}), spec("l", []any{"a"}),
			map[string]string{".spec.l": DiffListLength}, []string{".spec.l"}},
		{"list lengthened", spec("l", []any{"a"}), spec("l", []any{"a", "b"}),
			map[string]string{".spec.l": DiffListLength}, []string{".spec.l"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kinds := map[string]string{}
			for _, d := range Diff(tc.want, tc.got) {
				kinds[d.Path] = d.Kind
			}
			if diff := cmp.Diff(tc.kinds, kinds); diff != "" {
				t.Errorf("kinds (-want +got):\n%s", diff)
			}
			var losses []string
			for _, d := range Losses(tc.want, tc.got) {
				losses = append(losses, d.Path)
			}
			if diff := cmp.Diff(tc.losses, losses); diff != "" {
				t.Errorf("losses (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRoundTripTally: a round trip that only adds or normalises passes the round-trip check
// and is listed in added (bounded by maxAdded, every object counted); a loss fails it.
func TestRoundTripTally(t *testing.T) {
	tl := newTally()
	tl.maxAdded = 2
	orig := map[string]any{"spec": map[string]any{"timeout": "5m", "keep": "x"}}
	back := map[string]any{"spec": map[string]any{"timeout": "5m0s", "keep": "x"}, "status": map[string]any{}}
	lossy := map[string]any{"spec": map[string]any{"timeout": "5m0s"}, "status": map[string]any{}}
	for _, o := range []string{"a", "b"} {
		if n := tl.roundTrip(o, "v1 -> v2 -> v1", Diff(orig, back)); n != 0 {
			t.Errorf("%s: %d losses, want 0", o, n)
		}
	}
	if n := tl.roundTrip("c", "v1 -> v2 -> v1", Diff(orig, lossy)); n != 1 {
		t.Errorf("c: %d losses, want 1 (.spec.keep)", n)
	}
	c := tl.count(CheckRoundTrip)
	if c.Passed != 2 || c.Failed != 1 || len(tl.findings) != 1 || tl.findings[0].Path != ".spec.keep" {
		t.Errorf("round-trip passed %d failed %d, findings %+v; want 2, 1 and .spec.keep", c.Passed, c.Failed, tl.findings)
	}
	if tl.addedObjects != 3 || len(tl.added) != 2 {
		t.Errorf("added objects %d, changes kept %d; want 3 and 2 (maxAdded)", tl.addedObjects, len(tl.added))
	}
}

// TestDiffFrom: what the object sent holds and the input did not (absent, or null) — only a
// default of its own version put it there — is no loss when it is missing afterwards, at any
// depth; what the input held is, even when it equals the default.
func TestDiffFrom(t *testing.T) {
	cases := []struct {
		name             string
		given, sent, got map[string]any
		kinds            map[string]string // path -> kind
	}{
		{"a default the input did not hold", spec("url", "u"), spec("url", "u", "gitImplementation", "go-git"), spec("url", "u"),
			map[string]string{".spec.gitImplementation": DiffDefaultDropped}},
		{"a default over the input's null", spec("url", "u", "gitImplementation", nil), spec("url", "u", "gitImplementation", "go-git"), spec("url", "u"),
			map[string]string{".spec.gitImplementation": DiffDefaultDropped}},
		{"the input's own value, equal to the default", spec("url", "u", "gitImplementation", "go-git"), spec("url", "u", "gitImplementation", "go-git"), spec("url", "u"),
			map[string]string{".spec.gitImplementation": DiffLost}},
		{"a defaulted object, inside", spec(), spec("verify", map[string]any{"mode": "HEAD"}), spec("verify", map[string]any{}),
			map[string]string{".spec.verify.mode": DiffDefaultDropped}},
		{"a default inside the input's object", spec("verify", map[string]any{"secretRef": "s"}), spec("verify", map[string]any{"secretRef": "s", "mode": "HEAD"}), spec("verify", map[string]any{}),
			map[string]string{".spec.verify.mode": DiffDefaultDropped, ".spec.verify.secretRef": DiffLost}},
		{"a default in a list element", spec("items", []any{map[string]any{"name": "a"}}), spec("items", []any{map[string]any{"name": "a", "weight": int64(1)}}), spec("items", []any{map[string]any{"name": "a"}}),
			map[string]string{".spec.items[0].weight": DiffDefaultDropped}},
		{"a default that changed is a change", spec(), spec("mode", "go-git"), spec("mode", "libgit2"),
			map[string]string{".spec.mode": DiffChanged}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kinds := map[string]string{}
			for _, d := range DiffFrom(tc.given, tc.sent, tc.got) {
				kinds[d.Path] = d.Kind
				if d.Loss() != (d.Kind != DiffDefaultDropped) {
					t.Errorf("%s: Loss() = %v", d.Path, d.Loss())
				}
			}
			if diff := cmp.Diff(tc.kinds, kinds); diff != "" {
				t.Errorf("kinds (-want +got):\n%s", diff)
			}
		})
	}
}
