package preflight

// rewrite.go: the preflight of a rewrite as migrate, migrate --all and retire run it, bound
// to the rewrite's checkpoint (resume and evidence) and to the way to the conversion webhook.

import (
	"context"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// RewriteOptions are the values of a rewrite that its preflight needs.
type RewriteOptions struct {
	// Target is the version the rewrite writes at ("" is the storage version).
	Target string
	// Checkpoint is the rewrite's checkpoint file; "" is migrate's default for the cluster
	// and the CRD (migrate.DefaultCheckpointPath).
	Checkpoint string
	// ChunkSize, Concurrency and QPS are the rewrite's (Options).
	ChunkSize   int64
	Concurrency int
	QPS         float64
	// Proxy is core/v1's REST client, the way to a service-referenced conversion webhook
	// through the API server's service proxy (WebhookTransport); nil leaves what such a
	// webhook loses unknown.
	Proxy rest.Interface
	// Progress is Options.Progress.
	Progress func(done, total int64)
}

// CheckRewrite checks what rewriting crd's objects at o.Target would lose or be refused,
// with c (the migrate engine's clients: no client-side rate limit, 429s counted). The
// preflight keeps its evidence next to the rewrite's checkpoint, and a rewrite in progress
// there at the target has already written the objects up to its Through key: those are not
// checked again.
func CheckRewrite(ctx context.Context, c *migrate.Clients, crd *apiextensionsv1.CustomResourceDefinition, o RewriteOptions) (*Report, error) {
	var after, evidence string
	cpPath := o.Checkpoint
	if cpPath == "" {
		cpPath, _ = migrate.DefaultCheckpointPath(c.Server, crd.Name)
	}
	if cpPath != "" {
		evidence = cpPath + ".preflight"
		if cp, err := migrate.LoadCheckpoint(cpPath); err == nil && cp.ResumableFor(c.Server, crd) && crdinfo.StorageVersion(crd) == o.Target {
			after = cp.Through
		}
	}
	return Check(ctx, c.Dynamic, crd, Options{Target: o.Target, ChunkSize: o.ChunkSize, Transport: WebhookTransport(ctx, crd, o.Proxy),
		Concurrency: o.Concurrency, QPS: o.QPS, Throttled: c.Throttled, After: after, Evidence: evidence, Progress: o.Progress})
}

// WebhookTransport is the way to crd's conversion webhook for a preflight (webhookcheck's): its
// URL, an ExternalName Service's host, or the API server's service proxy through proxy for any
// other service (no option needed). nil when there is no webhook or it cannot be built: what
// the webhook loses is then reported as unknown.
func WebhookTransport(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, proxy rest.Interface) convert.Transport {
	if !webhookcheck.IsWebhook(crd) {
		return nil
	}
	t, err := webhookcheck.Transport(ctx, crd, nil, webhookcheck.Reach{Proxy: proxy, Timeout: 10 * time.Second})
	if err != nil {
		return nil
	}
	return t
}
