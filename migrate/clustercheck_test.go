package migrate

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The check after a cluster's migration, here with no migration at all (the controller did
// nothing): the objects written since the storage switch are proven stored at the new
// version by their resourceVersion, every other one is written back by this process, and a
// manager with fewer entries than before is reported. etcd then holds every object at v1.
func TestCheckRewrittenWritesBackWhatTheMigrationLeft(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "check", 30, false) // 30 objects stored at v1beta1, storage now v1
	crd := f.get(t)
	l, err := f.clients.Metadata.Resource(f.gvr("v1")).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	since := l.ResourceVersion
	f.createObjects(t, f.group, "v1", 30, 35) // written after: stored at v1
	before := map[string]int64{"someone/Apply": 7}
	check, err := checkRewritten(ctx, f.clients, crd, since, before, RewriteOptions{ChunkSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	if check.Objects != 35 || check.WrittenSince != 5 || check.WrittenHere != (Counts{Rewritten: 30}) || len(check.Failures) != 0 {
		t.Errorf("check = %+v, want 35 objects: 5 written since, 30 rewritten here", check)
	}
	if diff := cmp.Diff([]ManagerLoss{{Manager: "someone/Apply", Before: 7, After: 0}}, check.ManagersLost); diff != "" {
		t.Errorf("managers lost (-want +got):\n%s", diff)
	}
	stored, _ := etcdVersions(t, f.group, "widgets")
	if diff := cmp.Diff(map[string]int{f.group + "/v1": 35}, stored); diff != "" {
		t.Errorf("etcd (-want +got):\n%s", diff)
	}
}

// One answer to "a recorded, running migration of this CRD object", asked by the engine that
// re-attaches (clusterCheckpoint) and by the workflows that must check before they trust
// status.storedVersions (UncheckedClusterMigration): both refuse a record of another cluster
// reached at the same address, of another CRD object, storage version or generation, and one
// already checked; only the second also wants it created.
func TestRecordedClusterMigrationIsOneAnswer(t *testing.T) {
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "things.example.com", UID: "crd-uid", Generation: 3},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "things"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true}, {Name: "v1", Served: true, Storage: true}}}}
	record := func() *Checkpoint {
		return &Checkpoint{Server: "https://127.0.0.1:6443", Cluster: "cluster-a", CRD: crd.Name, UID: "crd-uid", StorageVersion: "v1", Generation: 3, State: StateRunning,
			ClusterMigration: &ClusterMigration{Name: "things-crdver-0123456789", APIVersion: ClusterMigrationGroup + "/v1beta1", Created: true}}
	}
	for _, tc := range []struct {
		name    string
		cluster string // the cluster reached now (Clients.ClusterID)
		mutate  func(*Checkpoint)
		follow  bool   // clusterCheckpoint re-attaches to it
		why     string // the note when it does not
		created bool   // UncheckedClusterMigration returns it
	}{
		{"the same", "cluster-a", func(*Checkpoint) {}, true, "", true},
		{"cluster unknown then", "cluster-a", func(cp *Checkpoint) { cp.Cluster = "" }, true, "", true},
		{"another cluster at the same address", "cluster-b", func(*Checkpoint) {}, false, "written for another cluster", false},
		{"the CRD created again", "cluster-a", func(cp *Checkpoint) { cp.UID = "old-uid" }, false, "deleted and created again", false},
		{"another storage version", "cluster-a", func(cp *Checkpoint) { cp.StorageVersion = "v1beta1" }, false, "while v1beta1 was the storage version", false},
		{"another generation", "cluster-a", func(cp *Checkpoint) { cp.Generation = 2 }, false, "generation 2, now 3", false},
		{"already checked", "cluster-a", func(cp *Checkpoint) { cp.State = StateComplete }, false, "", false},
		{"recorded, not created yet", "cluster-a", func(cp *Checkpoint) { cp.ClusterMigration.Created = false }, true, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cp.json")
			cp := record()
			tc.mutate(cp)
			if err := cp.Save(path); err != nil {
				t.Fatal(err)
			}
			id := tc.cluster
			c := &Clients{Server: "https://127.0.0.1:6443", clusterID: &id}
			got, notes, err := clusterCheckpoint(ctx, c, crd, path)
			if err != nil {
				t.Fatal(err)
			}
			if followed := got.ClusterMigration != nil; followed != tc.follow {
				t.Errorf("clusterCheckpoint follows the record: %v, want %v (notes %q)", followed, tc.follow, notes)
			}
			if tc.why != "" && (len(notes) != 1 || !strings.Contains(notes[0], tc.why)) {
				t.Errorf("notes %q, want one saying %q", notes, tc.why)
			}
			if tc.why == "" && len(notes) != 0 {
				t.Errorf("notes %q, want none", notes)
			}
			rec, err := UncheckedClusterMigration(ctx, c, crd, path)
			if err != nil {
				t.Fatal(err)
			}
			if (rec != nil) != tc.created {
				t.Errorf("UncheckedClusterMigration = %+v, want a record: %v", rec, tc.created)
			}
		})
	}
}
