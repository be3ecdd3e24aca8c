package migrate

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
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
