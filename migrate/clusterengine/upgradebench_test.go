package clusterengine_test

// BenchmarkSafeUpgrade: `kubectl crdver upgrade -f NEW --yes` (the built binary: plan of the
// release, preflight, backup, storage switch and rewrite, trim, the removed version's
// managedFields moved and the version removed, one server-side apply, verify) of a release that
// removes the storage version v1beta1, against the machine's ceiling IN THE SAME RUN,
// interleaved per iteration (see BenchmarkSafeMigrate for why). Each iteration, on the same
// objects:
//
//	ceiling   16 workers doing nothing but PUT the listed objects (putAll), after a storage
//	          switch that is not timed (the "proven" fixture)
//	checked   upgrade of a release whose v1 has a field v1beta1 lacks (the loss comparison runs)
//	          and whose updates an unbound ValidatingAdmissionPolicy matches (every object's
//	          write is sent as a dry run): every safety check on
//	proven    upgrade of a release whose versions have identical schemas, which no admission
//	          webhook or policy matches
//
// The release removes v1beta1 (the storage version): v1 becomes the storage version and the
// only version. After each timed upgrade, etcd is read directly (every object at v1) and the
// CRD is put back, untimed, with `upgrade -f OLD --yes` (v1beta1 served and storage again,
// every object rewritten at it).
//
//	CRDVER_BENCH_SAFE_OBJECTS  objects per CRD (default 500; recorded: 3000)
//	CRDVER_BENCH_SAFE_METHODS  comma-separated subset of ceiling,checked,proven
//	CRDVER_BENCH_BIN           the kubectl-crdver binary to time (default: built from this tree)

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func BenchmarkSafeUpgrade(b *testing.B) {
	bin := buildCommand(b)
	n := envInt("CRDVER_BENCH_SAFE_OBJECTS", 500)
	methods, proven, checked := safeFixtures(b, "u", "ceiling,checked,proven", n)
	cache := b.TempDir()
	type releases struct{ old, removed string }
	rel := map[*benchFixture]releases{}
	for _, f := range []*benchFixture{proven, checked} {
		rel[f] = releases{old: f.release(b, false), removed: f.release(b, true)}
	}
	cpu := map[*benchFixture]time.Duration{}
	upgrade := func(f *benchFixture, dir string, storage string) time.Duration {
		d, c := runUpgrade(b, bin, env.Kubeconfig, cache, dir)
		if storage == "v1" {
			cpu[f] += c
		}
		f.check(b, storage)
		return d
	}

	var tCeil, tChecked, tProven time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if methods["ceiling"] {
			b.StopTimer()
			to := proven.flip(b)
			b.StartTimer()
			start := time.Now()
			putAll(b, proven.c, proven.fresh(b), 16)
			tCeil += time.Since(start)
			proven.check(b, to)
			b.StopTimer()
			if to == "v1" {
				proven.flip(b)
				putAll(b, proven.c, proven.fresh(b), 16)
			}
			b.StartTimer()
		}
		for _, c := range []struct {
			on    bool
			f     *benchFixture
			total *time.Duration
		}{{methods["checked"], checked, &tChecked}, {methods["proven"], proven, &tProven}} {
			if !c.on {
				continue
			}
			*c.total += upgrade(c.f, rel[c.f].removed, "v1")
			b.StopTimer()
			upgrade(c.f, rel[c.f].old, "v1beta1")
			b.StartTimer()
		}
	}
	b.StopTimer()
	reportRates(b, n, map[string]time.Duration{"ceiling16": tCeil, "checked": tChecked, "proven": tProven},
		map[string]time.Duration{"checked": cpu[checked], "proven": cpu[proven]})
}

// release writes the fixture's CRD as a release into a new folder: as it is now (v1beta1 the
// storage version, v1 served), or with v1beta1 removed (v1 the storage version and only version).
func (f *benchFixture) release(b *testing.B, removeV1beta1 bool) string {
	b.Helper()
	cur := f.fresh(b)
	crd := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: cur.Name},
		Spec:       *cur.Spec.DeepCopy(),
	}
	var versions []apiextensionsv1.CustomResourceDefinitionVersion
	for _, v := range crd.Spec.Versions {
		switch {
		case v.Name == "v1beta1" && removeV1beta1:
			continue
		case v.Name == "v1":
			v.Storage = removeV1beta1
		case v.Name == "v1beta1":
			v.Storage = true
		}
		versions = append(versions, v)
	}
	crd.Spec.Versions = versions
	return writeRelease(b, crd)
}

// writeRelease writes crd as a release (crd.yaml) into a new folder.
func writeRelease(b *testing.B, crd *apiextensionsv1.CustomResourceDefinition) string {
	b.Helper()
	data, err := yaml.Marshal(crd)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "crd.yaml"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

// runUpgrade runs `kubectl-crdver upgrade -f dir --yes` against kubeconfig, a new backup and
// checkpoint each time (runCommand).
func runUpgrade(b *testing.B, bin, kubeconfig, cache, dir string) (wall, cpu time.Duration) {
	b.Helper()
	work := b.TempDir()
	return runCommand(b, bin, cache, "upgrade", "-f", dir, "--yes", "--kubeconfig", kubeconfig,
		"--backup", filepath.Join(work, "backup.yaml"), "--checkpoint", filepath.Join(work, "cp"), "-o", "json")
}
