package ownership

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// One description of field managers for doctor and retire (they had two formats: retire's
// without object counts, subresources missing from doctor's).
func TestDescribeWriters(t *testing.T) {
	last := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.FixedZone("CET", 3600)))
	ws := []Writer{
		{Manager: "flux", Operation: "Apply", Objects: 3, LastWrite: &last},
		{Manager: "ctl", Operation: "Update", Subresource: "status", Objects: 1},
		{Manager: "a", Operation: "Update", Objects: 2},
		{Manager: "b", Operation: "Update", Objects: 2},
		{Manager: "c", Operation: "Update", Objects: 2},
	}
	if got, want := DescribeWriters(ws[:2]), "flux (Apply, 3 objects, last 2026-11-27T09:00:00Z), ctl (Update status, 1 objects)"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got, want := DescribeWriters(ws), "flux (Apply, 3 objects, last 2026-11-27T09:00:00Z), ctl (Update status, 1 objects), a (Update, 2 objects), and 2 more"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
