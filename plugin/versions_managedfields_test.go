package plugin

import "testing"

// TestCanRemoveWaitsForManagedFields: after a migration and trim, the old version is out of
// status.storedVersions but every object still has managedFields entries of it (the objects
// were written at it), so removing it would break server-side apply on all of them
// (kubernetes#111937): versions says not safe, naming retire. After retire moves the entries,
// it is safe.
func TestCanRemoveWaitsForManagedFields(t *testing.T) {
	name, _, _ := migrateFixture(t, "mfsafety", 6)
	if r := runCluster(t, "migrate", name, "--to", "v1", "--yes", "--quiet"); r.code != ExitOK {
		t.Fatalf("migrate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := runCluster(t, "versions", name, "--can-remove", "v1beta1")
	if r.code != ExitProblems {
		t.Fatalf("--can-remove v1beta1 with entries left: exit %d, want %d\n%s%s", r.code, ExitProblems, r.stdout, r.stderr)
	}
	mustContain(t, "output", r.stdout+r.stderr, "6 object(s) hold managedFields entries of it", "kubectl crdver retire "+name+" v1beta1")

	if r := runCluster(t, "retire", name, "v1beta1", "--yes", "--quiet"); r.code != ExitOK {
		t.Fatalf("retire: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCluster(t, "versions", name, "--can-remove", "v1beta1"); r.code != ExitOK {
		t.Fatalf("--can-remove v1beta1 after retire: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
