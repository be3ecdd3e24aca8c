package crd

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

func TestSortByPriorityIssueExample(t *testing.T) {
	want := strings.Fields("v10 v2 v1 v11beta2 v10beta3 v3beta1 v12alpha1 v11alpha2 foo1 foo10")
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 50; i++ {
		got := append([]string{}, want...)
		rng.Shuffle(len(got), func(a, b int) { got[a], got[b] = got[b], got[a] })
		SortByPriority(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("shuffle %d sorted wrong (-want +got):\n%s", i, diff)
		}
	}
}

func TestStabilityOf(t *testing.T) {
	for v, want := range map[string]Stability{
		"v1": GA, "v10": GA, "v1beta1": Beta, "v2beta10": Beta, "v1alpha1": Alpha,
		"foo1": NonKube, "v1.2": NonKube, "v1beta": NonKube, "V1": NonKube, "v1gamma1": NonKube, "": NonKube,
	} {
		if got := StabilityOf(v); got != want {
			t.Errorf("StabilityOf(%q) = %s, want %s", v, got, want)
		}
	}
}

func TestPreferredVersionsIgnoresUnservedAndStorage(t *testing.T) {
	a := testcrd.New("g.example.com", "Thing", testcrd.Versions("v1beta1", "v2"), testcrd.Storage("v1beta1"), testcrd.Unserved("v2"))
	b := testcrd.New("g.example.com", "Thing", testcrd.Versions("v1alpha1", "foo"), testcrd.Storage("v1alpha1"))
	other := testcrd.New("h.example.com", "Thing", testcrd.Versions("foo2", "bar10"), testcrd.Storage("foo2"))
	got := PreferredVersions([]*apiextensionsv1.CustomResourceDefinition{a, b, other})
	want := map[string]string{"g.example.com": "v1beta1", "h.example.com": "bar10"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PreferredVersions (-want +got):\n%s", diff)
	}
}

func TestDecodeCRDv1beta1AppliesServerDefaults(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "crds", "widgets-v1beta1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Spec.PreserveUnknownFields {
		t.Error("v1beta1 must default preserveUnknownFields to true")
	}
	for _, v := range c.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil || v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"].Type != "integer" {
			t.Errorf("version %s did not get spec.validation copied in", v.Name)
		}
	}
	if diff := cmp.Diff([]string{"v1beta10", "v1beta2", "v1alpha1"}, VersionNames(c)); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
}

func TestDecodeCRDErrors(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"not a CRD":   {"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n", "apps/v1 Deployment is not a CustomResourceDefinition"},
		"bad yaml":    {"apiVersion: [\n", "malformed YAML"},
		"wrong shape": {"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec: {versions: 3}\n", "not a valid CustomResourceDefinition"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLookupVersionError(t *testing.T) {
	c := testcrd.New("stable.example.com", "Thing", testcrd.Versions("v1beta1", "v1"), testcrd.Storage("v1"))
	c.Name = "crontabs.stable.example.com"
	_, err := Lookup(c, "v3")
	want := `crontabs.stable.example.com: version "v3" is not in spec.versions (have: v1, v1beta1)`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

// The one wording, whatever the order of spec.versions, and sensible when there is nothing to list.
func TestVersionNotFoundWording(t *testing.T) {
	for name, tc := range map[string]struct {
		c       *apiextensionsv1.CustomResourceDefinition
		version string
		want    string
	}{
		"priority order": {testcrd.New("g.example.com", "Thing", testcrd.Versions("v1alpha1", "v2", "v1beta1"), testcrd.Storage("v2")), "v3",
			`things.g.example.com: version "v3" is not in spec.versions (have: v2, v1beta1, v1alpha1)`},
		"no versions":      {testcrd.New("g.example.com", "Thing"), "v1", `things.g.example.com: spec.versions is empty: the CustomResourceDefinition defines no version`},
		"no version given": {testcrd.New("g.example.com", "Thing", testcrd.Versions("v1"), testcrd.Storage("v1")), "", `things.g.example.com: no version given (have: v1)`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Lookup(tc.c, tc.version)
			var nf *VersionNotFoundError
			if !errors.As(err, &nf) || err.Error() != tc.want {
				t.Errorf("error = %v, want a *VersionNotFoundError saying %s", err, tc.want)
			}
		})
	}
}

func TestStorageServedAndAccessVersion(t *testing.T) {
	c := testcrd.New("g.example.com", "Thing", testcrd.Versions("v1beta1", "v1", "v2"), testcrd.Storage("v2"), testcrd.Unserved("v1beta1"), testcrd.Stored("v1beta1"))
	if got := StorageVersion(c); got != "v2" {
		t.Errorf("StorageVersion = %q, want v2", got)
	}
	if IsServed(c, "v1beta1") || !IsServed(c, "v1") || IsServed(c, "v9") {
		t.Error("IsServed is wrong")
	}
	if diff := cmp.Diff([]string{"v2", "v1"}, ServedVersions(c)); diff != "" {
		t.Errorf("ServedVersions (-want +got):\n%s", diff)
	}
	if v, err := AccessVersion(c); err != nil || v != "v2" {
		t.Errorf("AccessVersion = %q, %v; want the served storage version v2", v, err)
	}
	if !MigrationPending(c) {
		t.Error("MigrationPending = false with storedVersions [v1beta1] and storage v2")
	}
	c.Spec.Versions[2].Served = false
	if v, err := AccessVersion(c); err != nil || v != "v1" {
		t.Errorf("AccessVersion with the storage version unserved = %q, %v; want v1", v, err)
	}
	none := testcrd.New("g.example.com", "Thing", testcrd.Versions("v1"), testcrd.Storage("v1"), testcrd.Unserved("v1"))
	var ns *NoServedVersionError
	if _, err := AccessVersion(none); !errors.As(err, &ns) {
		t.Errorf("AccessVersion of a CRD serving nothing: error %v, want *NoServedVersionError", err)
	}
	if got := StorageVersion(testcrd.New("g.example.com", "Thing", testcrd.Versions("v1"))); got != "" {
		t.Errorf("StorageVersion with none marked = %q, want empty", got)
	}
	if got := GVR(c, "v1").String(); got != "g.example.com/v1, Resource=things" {
		t.Errorf("GVR = %s", got)
	}
}

func TestDefaultSource(t *testing.T) {
	c := testcrd.New("g.example.com", "Thing", testcrd.Versions("v1alpha1", "v1", "v2beta1"), testcrd.Storage("v1"), testcrd.Unserved("v2beta1"))
	for to, want := range map[string]string{"v1": "v1alpha1", "v1alpha1": "v1", "v2beta1": "v1"} {
		if got := DefaultSource(c, to); got != want {
			t.Errorf("DefaultSource(%s) = %s, want %s (highest-priority served other version)", to, got, want)
		}
	}
	only := testcrd.New("g.example.com", "Thing", testcrd.Versions("v1", "v2"), testcrd.Storage("v1"), testcrd.Unserved("v2"))
	if got := DefaultSource(only, "v1"); got != "v2" {
		t.Errorf("DefaultSource with no other served version = %s, want the other version v2", got)
	}
	if got := DefaultSource(testcrd.New("g.example.com", "Thing", testcrd.Versions("v1"), testcrd.Storage("v1")), "v1"); got != "v1" {
		t.Errorf("DefaultSource with one version = %s, want v1", got)
	}
}
