// Package migrate is the storage-version upgrade engine behind `kubectl crdver migrate`: the
// plan, the rewrite of every object (paged, concurrent, rate limited, resumable from a
// checkpoint), the guarded trim of status.storedVersions, and the in-cluster
// StorageVersionMigration engine. It has no command-line code in it: it takes clients and
// plain values and returns results as data.
package migrate

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/pager"
)

// Clients are the API clients the engine uses.
type Clients struct {
	CRDs     apiextensionsclient.Interface
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
	Kube     kubernetes.Interface
	// Server is the API server URL, which keys the default checkpoint file.
	Server string
	// throttled counts 429 answers on any of these clients (including those client-go retried).
	throttled *atomic.Int64
	// retries counts the requests netRetry sent again.
	retries *atomic.Int64
	// clusterID is ClusterID's answer, read once per run.
	clusterID *string
	// flow is the flow schema and priority level of the last answer (flowRecorder).
	flow *atomic.Pointer[[2]string]
}

// NewClients builds the clients from cfg. Client-go's own rate limiter is switched off: the
// rewrite has its own (RewriteOptions.QPS), and the client defaults must not be what holds
// a migration back.
func NewClients(cfg *rest.Config) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	c := &Clients{Server: cfg.Host, throttled: &atomic.Int64{}, retries: &atomic.Int64{}, clusterID: new(string), flow: &atomic.Pointer[[2]string]{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return throttleCounter{rt: rt, count: c.throttled} })
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return flowRecorder{rt: rt, seen: c.flow} })
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return netRetry{rt: rt, retries: c.retries} })
	var err error
	if c.CRDs, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Metadata, err = metadata.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// Plan is what a migration will do, worked out before anything is written.
type Plan struct {
	CRD            string           `json:"crd"`
	Group          string           `json:"group"`
	Resource       string           `json:"resource"`
	Namespaced     bool             `json:"namespaced"`
	StorageVersion string           `json:"storageVersion"`
	StoredVersions []string         `json:"storedVersions"`
	TargetVersion  string           `json:"targetVersion"`
	SwitchStorage  bool             `json:"switchStorage"`
	Objects        int64            `json:"objects"`
	Namespaces     []NamespaceCount `json:"namespaces,omitempty"`
	Steps          []string         `json:"steps"`
	// Budget is what the rewrite will ask of the cluster (Options.Budget, at least
	// MinBudgetObjects objects; nil otherwise).
	Budget *Budget `json:"budget,omitempty"`
}

// NamespaceCount is the number of objects in one namespace ("" for cluster-scoped objects).
type NamespaceCount struct {
	Namespace string `json:"namespace"`
	Objects   int64  `json:"objects"`
}

// NotServedError says that a version cannot become the storage version because it is not
// served.
type NotServedError struct{ CRD, Version string }

func (e *NotServedError) Error() string {
	return fmt.Sprintf("%s: version %q is not served: serve it (served: true) before making it the storage version", e.CRD, e.Version)
}

// CheckTarget checks that v can become crd's storage version: it exists (else a
// *crd.VersionNotFoundError) and is served (else a *NotServedError).
func CheckTarget(crd *apiextensionsv1.CustomResourceDefinition, v string) error {
	ver, err := crdinfo.Lookup(crd, v)
	if err != nil {
		return err
	}
	if !ver.Served {
		return &NotServedError{CRD: crd.Name, Version: v}
	}
	return nil
}

// BuildPlan works out what migrating crd to version to ("" = the current storage version)
// will do, counting the objects per namespace with a paged metadata-only list. trim says
// whether the run will trim status.storedVersions afterwards. to is checked with CheckTarget.
func BuildPlan(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, to string, chunkSize int64, trim bool) (*Plan, error) {
	if to != "" {
		if err := CheckTarget(crd, to); err != nil {
			return nil, err
		}
	}
	return buildPlan(ctx, c, crd, to, chunkSize, trim)
}

// buildPlan is BuildPlan for a target already checked.
func buildPlan(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, to string, chunkSize int64, trim bool) (*Plan, error) {
	storage := crdinfo.StorageVersion(crd)
	p := &Plan{
		CRD:            crd.Name,
		Group:          crd.Spec.Group,
		Resource:       crd.Spec.Names.Plural,
		Namespaced:     crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		StorageVersion: storage,
		StoredVersions: append([]string{}, crd.Status.StoredVersions...),
		TargetVersion:  storage,
	}
	if to != "" {
		p.TargetVersion = to
		p.SwitchStorage = to != storage
	}
	read, err := crdinfo.AccessVersion(crd)
	if err != nil {
		return nil, err
	}
	counts := map[string]int64{}
	err = pager.Each(ctx, pager.Metadata(c.Metadata.Resource(crdinfo.GVR(crd, read)), pager.Options{Limit: chunkSize}), func(list *metav1.PartialObjectMetadataList) error {
		for i := range list.Items {
			counts[list.Items[i].Namespace]++
			p.Objects++
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("counting %s: %w", crd.Name, err)
	}
	for ns, n := range counts {
		p.Namespaces = append(p.Namespaces, NamespaceCount{Namespace: ns, Objects: n})
	}
	sort.Slice(p.Namespaces, func(i, j int) bool { return p.Namespaces[i].Namespace < p.Namespaces[j].Namespace })

	if p.SwitchStorage {
		p.Steps = append(p.Steps, fmt.Sprintf("make %s the storage version (now %s)", to, storage))
	}
	p.Steps = append(p.Steps, fmt.Sprintf("rewrite %d objects so that each is stored at %s", p.Objects, p.TargetVersion))
	want := []string{p.TargetVersion}
	switch {
	case !trim:
		p.Steps = append(p.Steps, fmt.Sprintf("leave status.storedVersions [%s] as it is (trimming is off)", strings.Join(p.StoredVersions, " ")))
	case slices.Equal(p.StoredVersions, want):
		p.Steps = append(p.Steps, fmt.Sprintf("status.storedVersions is already [%s]: nothing to trim", p.TargetVersion))
	default:
		from := p.StoredVersions
		if p.SwitchStorage && !slices.Contains(from, p.TargetVersion) {
			from = append(append([]string{}, from...), p.TargetVersion) // the API server adds the new storage version
		}
		p.Steps = append(p.Steps, fmt.Sprintf("if every object is accounted for, set status.storedVersions from [%s] to [%s]",
			strings.Join(from, " "), p.TargetVersion))
	}
	return p, nil
}

// SwitchStorage makes v the storage version of the CRD called name (an update with the CRD's
// resourceVersion, retried on conflict), then waits until the API server's discovery reports
// the new storage version, so that the writes that follow are encoded at v.
func SwitchStorage(ctx context.Context, c *Clients, name, v string) (*apiextensionsv1.CustomResourceDefinition, error) {
	var updated *apiextensionsv1.CustomResourceDefinition
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		// The CRD read now may differ from the one planned with: check it again.
		if err := CheckTarget(crd, v); err != nil {
			return err
		}
		if crdinfo.StorageVersion(crd) == v {
			updated = crd
			return nil
		}
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == v
		}
		updated, err = c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := WaitStorageVersion(ctx, c, updated, 30*time.Second); err != nil {
		return nil, err
	}
	return updated, nil
}

// WaitStorageVersion waits (at most timeout) until discovery's storageVersionHash for the
// CRD's resource is the hash of its storage version: the API server then encodes writes at it.
func WaitStorageVersion(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, timeout time.Duration) error {
	storage := crdinfo.StorageVersion(crd)
	read, err := crdinfo.AccessVersion(crd)
	if err != nil {
		return err
	}
	want := storageVersionHash(crd.Spec.Group, storage, crd.Spec.Names.Kind)
	var last string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.Kube.Discovery().ServerResourcesForGroupVersion(crd.Spec.Group + "/" + read)
		if err != nil {
			return false, nil // not in discovery yet
		}
		for _, r := range list.APIResources {
			if r.Name == crd.Spec.Names.Plural {
				last = r.StorageVersionHash
				return r.StorageVersionHash == want, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s: the API server does not report %s as the storage version yet (discovery storageVersionHash %q, want %q): %w", crd.Name, storage, last, want, err)
	}
	return nil
}
