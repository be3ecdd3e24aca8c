package crdschema

import (
	"context"
	"strings"
	"testing"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// TestValidate: the API server's create validation refuses the invalid CRDs of testdata with its
// own messages, and InvalidError words them (the count, the first few); a valid CRD passes. (That the real API
// server gives the same messages: plugin's TestInvalidCRDsMatchAPIServer.)
func TestValidate(t *testing.T) {
	for file, want := range map[string]string{
		"two-storage.yaml": "CustomResourceDefinition gears.invalid.example.com is invalid: the API server would refuse it (2 errors): spec.versions: Invalid value: must have exactly one version marked as storage version; status.storedVersions: Invalid value: must have the storage version v1beta1",
		"bad-name.yaml":    `CustomResourceDefinition gear.invalid.example.com is invalid: the API server would refuse it (1 error): metadata.name: Invalid value: "gear.invalid.example.com": must be spec.names.plural+"."+spec.group`,
		"bad-cel.yaml":     "x-kubernetes-validations[0].rule: Invalid value: compilation failed: ERROR: <input>:1:11: found no matching overload for '_>_' applied to '(int, string)'",
	} {
		crd, err := crdinfo.Decode(mustCRD(t, "testdata", "invalid-crds", file))
		if err != nil {
			t.Fatal(err)
		}
		errs, err := Validate(context.Background(), crd)
		if err != nil || len(errs) == 0 {
			t.Fatalf("%s: Validate: %v, %d errors; want errors", file, err, len(errs))
		}
		msg := (&InvalidError{Name: crd.Name, Errors: errs}).Error()
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q\nwant %q", file, msg, want)
		}
	}
	crd, err := crdinfo.Decode(mustCRD(t, "testdata", "crds", "crontab.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if errs, err := Validate(context.Background(), crd); err != nil || len(errs) != 0 {
		t.Errorf("crontab.yaml: %v %v, want valid", err, errs)
	}
}
