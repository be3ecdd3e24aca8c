package plugin

import (
	"github.com/spf13/pflag"

	"github.com/crdver/kubectl-crdver/migrate"
)

// RewriteFlags are the flags of the object rewrite that migrate and retire share.
type RewriteFlags struct {
	Concurrency int
	QPS         float64
	ChunkSize   int64
	Checkpoint  string
	// AllowDataLoss rewrites even when the preflight finds objects that would lose fields
	// (or cannot tell); SkipInvalid even when it finds objects whose write would be rejected.
	AllowDataLoss bool
	SkipInvalid   bool
	// AllowOwnershipLoss rewrites even when the preflight's dry runs show objects losing
	// field managers (managedFields entries); --allow-data-loss is no consent to that.
	AllowOwnershipLoss bool
}

// addRewriteFlags registers --concurrency, --qps, --chunk-size, --checkpoint, and the
// preflight's --allow-data-loss, --skip-invalid and --allow-ownership-loss on f.
func (r *RewriteFlags) addRewriteFlags(f *pflag.FlagSet, checkpointHelp string) {
	f.IntVar(&r.Concurrency, "concurrency", 0, "Writes in flight (the rewrite's, and the preflight's dry-run writes); 0 adapts them to the rate the API server completes them and to 429s")
	f.Float64Var(&r.QPS, "qps", 0, "Limit requests per second of the preflight and of the rewrite (0: no client-side limit; the API server's priority and fairness still applies)")
	f.Int64Var(&r.ChunkSize, "chunk-size", 500, "Objects per list page (memory is bounded by it)")
	f.StringVar(&r.Checkpoint, "checkpoint", "", checkpointHelp)
	f.BoolVar(&r.AllowDataLoss, "allow-data-loss", false, "Rewrite even when objects would lose fields the target version's schema does not have (the preflight lists them)")
	f.BoolVar(&r.AllowOwnershipLoss, "allow-ownership-loss", false, "Rewrite even when the API server's dry run of the rewrite drops field managers of objects (the preflight lists them; --allow-data-loss does not allow this)")
	f.BoolVar(&r.SkipInvalid, "skip-invalid", false, "Rewrite even when some objects' writes would be rejected: they are left as they are and status.storedVersions is not trimmed")
}

// validateRewriteFlags checks --concurrency, --qps and --chunk-size. It does no I/O.
func (r *RewriteFlags) validateRewriteFlags() error {
	switch {
	case r.Concurrency < 0:
		return UsageErrorf("--concurrency must be 0 (adaptive) or more, got %d", r.Concurrency)
	case r.QPS < 0:
		return UsageErrorf("--qps must be 0 (no limit) or more, got %v", r.QPS)
	case r.ChunkSize < 1:
		return UsageErrorf("--chunk-size must be at least 1, got %d", r.ChunkSize)
	}
	return nil
}

// rewriteOptions are the engine's options for these flags.
func (r *RewriteFlags) rewriteOptions() migrate.RewriteOptions {
	return migrate.RewriteOptions{Concurrency: r.Concurrency, QPS: r.QPS, ChunkSize: r.ChunkSize, Checkpoint: r.Checkpoint}
}
