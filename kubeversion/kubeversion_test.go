package kubeversion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apivalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

func TestMain(m *testing.M) {
	// The feature gate logs each default an emulation change flips; the binary silences klog too.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}

func TestParse(t *testing.T) {
	for in, want := range map[string]Version{
		"1.33": {1, 33}, "v1.33": {1, 33}, "1.33.4": {1, 33}, "v1.33.4-gke.1200": {1, 33}, " 1.40 ": {1, 40},
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1", "latest", "0.33", "x.y"} {
		if v, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v; want an error", in, v)
		}
	}
}

func TestFromInfo(t *testing.T) {
	for _, c := range []struct {
		info apimachineryversion.Info
		want Version
	}{
		{apimachineryversion.Info{Major: "1", Minor: "34", GitVersion: "v1.34.4"}, Version{1, 34}},
		{apimachineryversion.Info{Major: "1", Minor: "33+", GitVersion: "v1.33.5-eks-113cf36"}, Version{1, 33}},
		{apimachineryversion.Info{Major: "1", Minor: "32+", GitVersion: "weird"}, Version{1, 32}},
	} {
		got, err := FromInfo(&c.info)
		if err != nil || got != c.want {
			t.Errorf("FromInfo(%+v) = %v, %v; want %v", c.info, got, err, c.want)
		}
	}
	if _, err := FromInfo(&apimachineryversion.Info{GitVersion: "weird"}); err == nil {
		t.Error("FromInfo with no version: want an error")
	}
}

func TestCheck(t *testing.T) {
	if Newest != (Version{1, 37}) {
		t.Logf("linked libraries are %s", Newest)
	}
	if _, err := Check(Oldest.AddMinor(-1)); err == nil {
		t.Errorf("Check(%s): want an error", Oldest.AddMinor(-1))
	} else if !strings.Contains(err.Error(), "older than the oldest") {
		t.Errorf("Check: %v", err)
	}
	if w, err := Check(Newest.AddMinor(1)); err != nil || !strings.Contains(w, "newer than") {
		t.Errorf("Check(newer) = %q, %v; want a warning", w, err)
	}
	for v := Oldest; !Newest.Less(v); v = v.AddMinor(1) {
		if w, err := Check(v); w != "" || err != nil {
			t.Errorf("Check(%s) = %q, %v; want nothing", v, w, err)
		}
	}
	if release, err := Use(Oldest.AddMinor(-1)); err == nil {
		release()
		t.Error("Use(too old): want an error")
	} else if _, ok := err.(*TooOldError); !ok {
		t.Errorf("Use(too old): %T %v; want a *TooOldError", err, err)
	}
}

// crdWithRule is a CRD create as the API server validates it, with one CEL rule on spec.
func crdWithRule(t *testing.T, rule string) *apiextensions.CustomResourceDefinition {
	t.Helper()
	doc := fmt.Sprintf(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"probes.kubeversion.example.com"},
"spec":{"group":"kubeversion.example.com","scope":"Namespaced",
 "names":{"plural":"probes","singular":"probe","kind":"Probe","listKind":"ProbeList"},
 "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{
  "spec":{"type":"object","x-kubernetes-validations":[{"rule":%q}],"properties":{
   "items":{"type":"array","maxItems":16,"items":{"type":"string","maxLength":64}},
   "version":{"type":"string","maxLength":64},
   "labels":{"type":"object","maxProperties":16,"additionalProperties":{"type":"string","maxLength":64}}}}}}}}]}}`, rule)
	v1, err := crdinfo.Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	internal := &apiextensions.CustomResourceDefinition{}
	if err := crdinfo.Scheme().Convert(v1, internal, nil); err != nil {
		t.Fatal(err)
	}
	internal.Status.StoredVersions = []string{"v1"}
	return internal
}

// validateAs runs the API server's CRD create validation as Kubernetes v.
func validateAs(t *testing.T, v Version, rule string) string {
	t.Helper()
	release, err := Use(v)
	if err != nil {
		t.Fatalf("Use(%s): %v", v, err)
	}
	defer release()
	errs := apivalidation.ValidateCustomResourceDefinition(context.Background(), crdWithRule(t, rule))
	if len(errs) == 0 {
		return ""
	}
	return errs.ToAggregate().Error()
}

// TestCELLibrariesFollowVersion: a CEL library is admitted in new rules one minor after it
// was introduced, with the server's own message before that (measured on 1.32.13, 1.33.13 and
// 1.34.4: "undeclared reference to 'distinct'", … 'isSemver', and the two-variable all()).
func TestCELLibrariesFollowVersion(t *testing.T) {
	for _, c := range []struct {
		name, rule, refused string
		lastRefused         Version
	}{
		{"lists v3 distinct", "self.items.distinct().size() == self.items.size()", "undeclared reference to 'distinct'", Version{1, 34}},
		{"lists v3 sortBy", "self.items.sortBy(x, x).size() >= 0", "undeclared reference to 'sortBy'", Version{1, 34}},
		{"semver", "isSemver(self.version)", "undeclared reference to 'isSemver'", Version{1, 33}},
		{"two-variable comprehension", "self.labels.all(k, v, k.size() > 0 && v.size() > 0)", "undeclared reference to 'all'", Version{1, 32}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for v := Oldest; !Newest.Less(v); v = v.AddMinor(1) {
				got := validateAs(t, v, c.rule)
				if !c.lastRefused.Less(v) {
					if !strings.Contains(got, c.refused) {
						t.Errorf("as %s: %.300q; want it refused with %q", v, got, c.refused)
					}
				} else if got != "" {
					t.Errorf("as %s: %.300q; want it accepted", v, got)
				}
			}
		})
	}
}

func TestEmulateSetsCompatibilityAndFeatureGates(t *testing.T) {
	for v := Oldest; !Newest.Less(v); v = v.AddMinor(1) {
		release, err := Use(v)
		if err != nil {
			t.Fatalf("Use(%s): %v", v, err)
		}
		t.Cleanup(release)
		if got := compatibilityVersionInUse(); got != v.AddMinor(-1) {
			t.Errorf("as %s: DefaultCompatibilityVersion = %s; want %s", v, got, v.AddMinor(-1))
		}
		if got := Emulated(); got != v {
			t.Errorf("Emulated() = %s; want %s", got, v)
		}
		ev := utilfeature.DefaultMutableFeatureGate.EmulationVersion()
		if int(ev.Minor()) != v.Minor {
			t.Errorf("as %s: feature gate emulation version %s", v, ev)
		}
		release()
	}
	// Formats follow too: k8s-short-name is validated from compatibility version 1.34, so a
	// 1.35 server rejects "Not_A_Name" where a 1.34 server ignores the format.
	for v, wantValid := range map[Version]bool{{1, 34}: true, {1, 35}: false} {
		release, err := Use(v)
		if err != nil {
			t.Fatal(err)
		}
		val, _, err := apiservervalidation.NewSchemaValidator(&apiextensions.JSONSchemaProps{Type: "string", Format: "k8s-short-name"})
		if err != nil {
			t.Fatal(err)
		}
		if got := val.Validate("Not_A_Name").IsValid(); got != wantValid {
			t.Errorf("as %s: k8s-short-name format valid = %v; want %v", v, got, wantValid)
		}
		release()
	}
}

func TestNotes(t *testing.T) {
	msg := `spec.myASN: Invalid value: 4294967295: Maximum boundary value must be of type integer with format int32 in spec.myASN`
	for v, want := range map[Version]string{
		{1, 34}: "Kubernetes 1.34 accepts this; 1.36+ reject it, as this verdict does",
		{1, 35}: "Kubernetes 1.35 accepts this; 1.36+ reject it, as this verdict does",
		{1, 37}: "Kubernetes 1.32–1.35 accept this; 1.36+ reject it, as here",
	} {
		notes := NotesFor(v, CheckObjectValidation, []string{"something else", msg})
		if len(notes) != 1 || !strings.HasPrefix(notes[0], want) {
			t.Errorf("as %s: %q; want one starting %q", v, notes, want)
		}
	}
	if n := NotesFor(Version{1, 34}, CheckObjectValidation, []string{"spec.x: Invalid value: 3: must be less than or equal to 2"}); n != nil {
		t.Errorf("unrelated message: %q", n)
	}
	if n := NotesFor(Version{1, 34}, CheckCRDValidation, []string{msg}); n != nil {
		t.Errorf("other check: %q", n)
	}
	// A wording-only difference never notes a verdict.
	if n := NotesFor(Version{1, 34}, CheckObjectValidation, []string{`spec: Invalid value: "object": items must be unique`}); n != nil {
		t.Errorf("wording only: %q", n)
	}
}

func TestDifferencesTable(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range Differences() {
		if d.ID == "" || seen[d.ID] {
			t.Errorf("%q: empty or duplicate id", d.ID)
		}
		seen[d.ID] = true
		if !d.OldUntil.Less(d.NewSince) || d.OldUntil.Less(Oldest) || Newest.Less(d.NewSince) {
			t.Errorf("%s: old until %s, new since %s: want Oldest <= old < new <= Newest", d.ID, d.OldUntil, d.NewSince)
		}
		if (d.Match == nil) != d.WordingOnly {
			t.Errorf("%s: a difference that changes verdicts needs Match (and only it)", d.ID)
		}
		if len(d.Checks) == 0 || d.Summary == "" || d.Before == "" || d.After == "" {
			t.Errorf("%s: incomplete: %+v", d.ID, d)
		}
	}
}

// TestUseOneVersionPerRun: the version of a run is chosen once. Using the version in use again
// is accepted; another version is refused with an error naming both, until every holder has
// released it; libraries' Require accepts only the version in use (or zero: "whatever is in
// use"); the last release puts the code back to Newest.
func TestUseOneVersionPerRun(t *testing.T) {
	v34, v35 := Version{1, 34}, Version{1, 35}
	release, err := Use(v34)
	if err != nil {
		t.Fatalf("Use(%s): %v", v34, err)
	}
	t.Cleanup(release)
	again, err := Use(v34)
	if err != nil {
		t.Fatalf("Use(%s) while %s is in use: %v; want it accepted", v34, v34, err)
	}
	_, err = Use(v35)
	var inUse *InUseError
	if !errors.As(err, &inUse) || inUse.InUse != v34 || inUse.Asked != v35 {
		t.Fatalf("Use(%s) while %s is in use: %T %v; want an *InUseError", v35, v34, err, err)
	}
	if want := "cannot judge as Kubernetes 1.35: this process already judges as Kubernetes 1.34"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q; want it to start %q", err, want)
	}
	if got := Emulated(); got != v34 {
		t.Errorf("after the refused Use: Emulated() = %s; want %s", got, v34)
	}
	if got, err := Require(v34); err != nil || got != v34 {
		t.Errorf("Require(%s) = %s, %v; want %s", v34, got, err, v34)
	}
	if got, err := Require(Version{}); err != nil || got != v34 {
		t.Errorf("Require(zero) = %s, %v; want %s", got, err, v34)
	}
	var notInUse *NotInUseError
	if _, err := Require(v35); !errors.As(err, &notInUse) || !strings.Contains(err.Error(), "runs as Kubernetes 1.34") {
		t.Errorf("Require(%s) while %s is in use: %v; want a *NotInUseError naming %s", v35, v34, err, v34)
	}

	release()
	release() // a second call of the same release does nothing
	if got := Emulated(); got != v34 {
		t.Errorf("one holder left: Emulated() = %s; want %s", got, v34)
	}
	if _, err := Use(v35); err == nil {
		t.Errorf("Use(%s) while a holder of %s is left: want an error", v35, v34)
	}
	again()
	if got := Emulated(); got != Newest {
		t.Errorf("every holder released: Emulated() = %s; want %s", got, Newest)
	}
	if got, err := Require(Newest); err != nil || got != Newest {
		t.Errorf("nothing in use: Require(%s) = %s, %v", Newest, got, err)
	}
	release35, err := Use(v35)
	if err != nil {
		t.Fatalf("Use(%s) once the run of %s ended: %v", v35, v34, err)
	}
	defer release35()
	if got := compatibilityVersionInUse(); got != v34 {
		t.Errorf("as %s: DefaultCompatibilityVersion = %s; want %s", v35, got, v34)
	}
	// A version newer than the linked code runs as Newest: it is the same version as Newest.
	release35()
	releaseNewest, err := Use(Newest)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseNewest()
	newer, err := Use(Newest.AddMinor(2))
	if err != nil {
		t.Errorf("Use(%s) while %s is in use: %v; want it accepted (judged as %s)", Newest.AddMinor(2), Newest, err, Newest)
	} else {
		newer()
	}
}
