package migrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	ended "github.com/crdver/kubectl-crdver/outcome"
)

// ClusterMigrationGroup is the API group of the in-cluster StorageVersionMigration.
const ClusterMigrationGroup = "storagemigration.k8s.io"

// ClusterResult is what a StorageVersionMigration did.
type ClusterResult struct {
	Name           string  `json:"name"`
	APIVersion     string  `json:"apiVersion"`
	Succeeded      bool    `json:"succeeded"`
	Message        string  `json:"message,omitempty"`
	ElapsedSeconds float64 `json:"elapsedSeconds"`
	// Gone: the migration no longer existed when this run read it (deleted before it was read
	// to have ended); the check wrote back what it had not rewritten.
	Gone bool `json:"gone,omitempty"`
	// Reattached: it was created by an earlier run (recorded in its checkpoint), which was
	// detached, interrupted or killed; this run followed it from there.
	Reattached bool `json:"reattached,omitempty"`
	// Detached: this run left it running in the cluster (RewriteOptions.Detach).
	Detached bool `json:"detached,omitempty"`
	// Notes say what this run did with an earlier run's record.
	Notes []string `json:"notes,omitempty"`
	// Check is what this run checked and wrote back after the migration (RewriteCluster; nil
	// when only RunCluster ran).
	Check *ClusterCheck `json:"check,omitempty"`
	// Evidence is what the migration proves, for Trim: RunCluster's is the controller's word,
	// RewriteCluster's its check of every object.
	Evidence Evidence `json:"-"`
}

// ClusterEngineAccess are the rights the cluster engine needs besides NeededAccess's.
func ClusterEngineAccess() []Access {
	return []Access{
		{Verb: "create", Group: ClusterMigrationGroup, Resource: "storageversionmigrations"},
		{Verb: "get", Group: ClusterMigrationGroup, Resource: "storageversionmigrations"},
	}
}

// ServedClusterMigrationVersion returns the version of storagemigration.k8s.io the cluster
// prefers (v1beta1 in 1.37), or an error saying the API is not served.
func ServedClusterMigrationVersion(c *Clients) (string, error) {
	groups, err := c.Kube.Discovery().ServerGroups()
	if err != nil {
		return "", fmt.Errorf("reading the API groups of the cluster: %w", err)
	}
	for _, g := range groups.Groups {
		if g.Name == ClusterMigrationGroup && g.PreferredVersion.Version != "" {
			return g.PreferredVersion.Version, nil
		}
	}
	return "", clusterUnavailablef("the cluster does not serve the %s API (StorageVersionMigration): it needs the StorageVersionMigrator feature gate and kube-apiserver's --runtime-config=%s/v1beta1=true, and kube-controller-manager running storage-version-migrator-controller", ClusterMigrationGroup, ClusterMigrationGroup)
}

// RunCluster creates a StorageVersionMigration (apiVersion storagemigration.k8s.io/version)
// for crd's resource and follows its conditions until Succeeded or Failed (or ctx ends: the
// migration then keeps running in the cluster). onChange is called with each new condition.
// It records nothing: RewriteCluster is the engine a run uses (checkpointed, re-attachable).
//
// When no controller has set any condition after startTimeout (0: one minute), the migration
// is deleted again and an error says that no controller is processing it.
func RunCluster(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, version string, startTimeout time.Duration, onChange func(cond, message string)) (*ClusterResult, error) {
	gvr := clusterGVR(version)
	svm := clusterMigrationObject(crd, version)
	svm.SetGenerateName(crd.Spec.Names.Plural + "-")
	created, err := c.Dynamic.Resource(gvr).Create(ctx, svm, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating a StorageVersionMigration for %s: %w", crd.Name, err)
	}
	out := newClusterResult(crd, created.GetName(), gvr)
	_, err = followCluster(ctx, c, gvr, out, time.Now(), startTimeout, false, onChange)
	return out, err
}

func clusterGVR(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: ClusterMigrationGroup, Version: version, Resource: "storageversionmigrations"}
}

// clusterMigrationObject is a StorageVersionMigration of crd's resource (no name yet).
func clusterMigrationObject(crd *apiextensionsv1.CustomResourceDefinition, version string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ClusterMigrationGroup + "/" + version,
		"kind":       "StorageVersionMigration",
		"metadata":   map[string]any{},
		"spec":       map[string]any{"resource": map[string]any{"group": crd.Spec.Group, "resource": crd.Spec.Names.Plural}},
	}}
}

// newClusterResult is the result of following the migration name of crd, its evidence the
// controller's word until a check replaces it.
func newClusterResult(crd *apiextensionsv1.CustomResourceDefinition, name string, gvr schema.GroupVersionResource) *ClusterResult {
	out := &ClusterResult{Name: name, APIVersion: gvr.GroupVersion().String()}
	out.Evidence = Evidence{CRD: crd.Name, UID: string(crd.UID), StorageVersion: crdinfo.StorageVersion(crd), Generation: crd.Generation,
		Engine: "StorageVersionMigration " + name}
	return out
}

// errStillRunning: followCluster was asked to look once, and the migration has not ended.
var errStillRunning = errors.New("the StorageVersionMigration is still running")

// followCluster polls the migration out.Name (its wait for a controller counted from created) until it ends (out says how:
// Succeeded, Failed, or Gone when it no longer exists) or ctx ends; once, it looks a single
// time and returns errStillRunning when it has not ended. deleted says that it was deleted
// here because no controller set a condition within startTimeout of its creation.
func followCluster(ctx context.Context, c *Clients, gvr schema.GroupVersionResource, out *ClusterResult, created time.Time, startTimeout time.Duration, once bool, onChange func(cond, message string)) (deleted bool, err error) {
	if startTimeout <= 0 {
		startTimeout = time.Minute
	}
	start := time.Now()
	seen := map[string]bool{}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		got, err := c.Dynamic.Resource(gvr).Get(ctx, out.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			out.Gone, out.Message = true, "it no longer exists (deleted before this run read how it ended)"
			out.ElapsedSeconds = time.Since(start).Seconds()
			return false, nil
		case err != nil && ctx.Err() != nil:
			return false, fmt.Errorf("stopped following StorageVersionMigration %s (it keeps running in the cluster): %w", out.Name, ctx.Err())
		case err != nil:
			return false, fmt.Errorf("reading StorageVersionMigration %s: %w", out.Name, err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		// status.resourceVersion is set by the controller (its resource-version half) when it
		// takes the migration up: 1.35's then waits, without a condition, until its garbage
		// collector's informer of the resource reaches that revision — on a resource nobody
		// writes, a watch bookmark (a minute) and its retry back-off later.
		taken, _, _ := unstructured.NestedString(got.Object, "status", "resourceVersion")
		if len(conds) == 0 && taken == "" && time.Since(created) > startTimeout {
			_ = c.Dynamic.Resource(gvr).Delete(context.WithoutCancel(ctx), out.Name, metav1.DeleteOptions{})
			return true, clusterUnavailablef("StorageVersionMigration %s had no status after %s: no controller is processing it (kube-controller-manager needs the StorageVersionMigrator feature gate and its --controllers to include storage-version-migrator-controller); it was deleted again", out.Name, startTimeout)
		}
		for _, raw := range conds {
			cond, _ := raw.(map[string]any)
			typ, _ := cond["type"].(string)
			status, _ := cond["status"].(string)
			msg, _ := cond["message"].(string)
			if status != "True" {
				continue
			}
			if !seen[typ] {
				seen[typ] = true
				if onChange != nil {
					onChange(typ, msg)
				}
			}
			switch typ {
			case "Succeeded":
				out.Succeeded, out.Message = true, msg
				out.Evidence.Complete = true
				out.ElapsedSeconds = time.Since(start).Seconds()
				return false, nil
			case "Failed":
				out.Message = msg
				out.Evidence.Failed = 1
				out.ElapsedSeconds = time.Since(start).Seconds()
				return false, nil
			}
		}
		if once {
			return false, errStillRunning
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("stopped following StorageVersionMigration %s (it keeps running in the cluster): %w", out.Name, ctx.Err())
		case <-t.C:
		}
	}
}

// DetachedError: the run left the StorageVersionMigration Name rewriting the objects of CRD in
// the cluster (RewriteOptions.Detach), recorded in Checkpoint: the same run, started again,
// re-attaches to it (and, once it has ended, checks every object and goes on).
type DetachedError struct {
	CRD, Name, APIVersion, Checkpoint string
}

func (e *DetachedError) Error() string {
	return fmt.Sprintf("%s: the StorageVersionMigration %s (%s) rewrites its objects in the cluster; recorded in %s: not followed to its end (detached)", e.CRD, e.Name, e.APIVersion, e.Checkpoint)
}

// Outcome is how a run that detached ends: not done, not failed (could not complete: the
// cluster carries on), with what remains: the same command again, which re-attaches, checks
// every object, trims status.storedVersions and then does what the command does after
// (then: "" when nothing).
func (e *DetachedError) Outcome(then string) ended.Outcome {
	out := ended.New(ended.Incomplete, "%v", e)
	after := "then trims status.storedVersions"
	if then != "" {
		after = "trims status.storedVersions and " + then
	}
	out.Remaining = append(out.Remaining, fmt.Sprintf("%s: the StorageVersionMigration %s rewrites the objects in the cluster: run the same command again to re-attach (it checks every object, %s)", e.CRD, e.Name, after))
	return out
}
