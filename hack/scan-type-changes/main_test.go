package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestScanFindsOpenTelemetryConfig: the scan of testdata/releases/opentelemetry-operator
// (v0.98.0 → v0.99.0) names spec.config's change of type (string → object) between the
// storage versions, and the map type of the target allocator's selectors; the same release
// against itself has no change.
func TestScanFindsOpenTelemetryConfig(t *testing.T) {
	const dir = "../../testdata/releases/opentelemetry-operator/"
	old, err := fromFiles(dir + "v0.98.0")
	if err != nil {
		t.Fatal(err)
	}
	next, err := fromFiles(dir + "v0.99.0")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if !report(&b, "v0.98.0", "v0.99.0", old, next) {
		t.Fatalf("no change found:\n%s", b.String())
	}
	for _, want := range []string{
		"opentelemetrycollectors.opentelemetry.io: storage v1alpha1 -> v1beta1 (conversion None; v1alpha1 served: true)",
		"  spec.config: string -> object [type]",
		"  spec.targetAllocator.prometheusCR.podMonitorSelector: map -> object(atomic) [map type: the values fit, field ownership changes]",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
	b.Reset()
	if report(&b, "v0.99.0", "v0.99.0", next, next) {
		t.Errorf("a release against itself:\n%s", b.String())
	}
}

func TestFits(t *testing.T) {
	for _, c := range []struct {
		old, next shape
		want      bool
	}{
		{shape{typ: "integer"}, shape{typ: "int-or-string"}, true},
		{shape{typ: "int-or-string"}, shape{typ: "string"}, false},
		{shape{typ: "integer"}, shape{typ: "string"}, false},
		{shape{typ: "string"}, shape{typ: "any"}, true},
		{shape{typ: "string"}, shape{typ: "array", listType: "atomic"}, false},
		{shape{typ: "array", listType: "atomic"}, shape{typ: "array", listType: "map", listKeys: "name"}, false},
		{shape{typ: "map"}, shape{typ: "object"}, true},
	} {
		if got := fits(c.old, c.next); got != c.want {
			t.Errorf("fits(%s, %s) = %v, want %v", c.old, c.next, got, c.want)
		}
	}
}
