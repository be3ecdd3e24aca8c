package migrate

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
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
//
// When no controller has set any condition after startTimeout (0: one minute), the migration
// is deleted again and an error says that no controller is processing it.
func RunCluster(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, version string, startTimeout time.Duration, onChange func(cond, message string)) (*ClusterResult, error) {
	if startTimeout <= 0 {
		startTimeout = time.Minute
	}
	start := time.Now()
	gvr := schema.GroupVersionResource{Group: ClusterMigrationGroup, Version: version, Resource: "storageversionmigrations"}
	svm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ClusterMigrationGroup + "/" + version,
		"kind":       "StorageVersionMigration",
		"metadata":   map[string]any{"generateName": crd.Spec.Names.Plural + "-"},
		"spec":       map[string]any{"resource": map[string]any{"group": crd.Spec.Group, "resource": crd.Spec.Names.Plural}},
	}}
	created, err := c.Dynamic.Resource(gvr).Create(ctx, svm, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating a StorageVersionMigration for %s: %w", crd.Name, err)
	}
	out := &ClusterResult{Name: created.GetName(), APIVersion: gvr.GroupVersion().String()}
	out.Evidence = Evidence{CRD: crd.Name, UID: string(crd.UID), StorageVersion: crdinfo.StorageVersion(crd), Generation: crd.Generation,
		Engine: "StorageVersionMigration " + out.Name}
	seen := map[string]bool{}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		got, err := c.Dynamic.Resource(gvr).Get(ctx, out.Name, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return out, fmt.Errorf("stopped following StorageVersionMigration %s (it keeps running in the cluster): %w", out.Name, ctx.Err())
			}
			return out, fmt.Errorf("reading StorageVersionMigration %s: %w", out.Name, err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		if len(conds) == 0 && time.Since(start) > startTimeout {
			_ = c.Dynamic.Resource(gvr).Delete(context.WithoutCancel(ctx), out.Name, metav1.DeleteOptions{})
			return out, clusterUnavailablef("StorageVersionMigration %s had no status after %s: no controller is processing it (kube-controller-manager needs the StorageVersionMigrator feature gate and its --controllers to include storage-version-migrator-controller); it was deleted again", out.Name, startTimeout)
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
				return out, nil
			case "Failed":
				out.Message = msg
				out.Evidence.Failed = 1
				out.ElapsedSeconds = time.Since(start).Seconds()
				return out, nil
			}
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("stopped following StorageVersionMigration %s (it keeps running in the cluster): %w", out.Name, ctx.Err())
		case <-t.C:
		}
	}
}
