package doctor

import (
	"fmt"
	"strings"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// CheckDataLoss: objects whose data is held at a version in status.storedVersions and would
// be lost when read (and so written) at the storage version.
const CheckDataLoss = "data-loss"

// shownLosses bounds the objects a finding names.
const shownLosses = 3

// checkDataLoss reads, for a CRD with a pending migration, every object at each stored
// version and at the storage version (package preflight, the check migrate runs before it
// writes): fields present at the stored version and gone at the storage version are lost by
// the next write of the object, by anyone. It returns whether any were found.
func (k *checker) checkDataLoss() bool {
	crd := k.crd
	if k.c.dyn == nil || !crdinfo.MigrationPending(crd) || !crdinfo.IsServed(crd, crdinfo.StorageVersion(crd)) {
		return false
	}
	r, err := preflight.Check(k.ctx, k.c.dyn, crd, preflight.Options{ChunkSize: k.opts.ChunkSize, SkipRejections: true,
		Transport: k.transport(), MaxListed: shownLosses})
	if err != nil {
		k.incomplete(CheckDataLoss, fmt.Errorf("reading the objects of %s at its stored versions: %w", crd.Name, err))
		return false
	}
	for _, u := range r.Unknown {
		// A stored version that is unserved or gone included: what its objects hold cannot be
		// read, so whether they lose fields is unknown.
		for _, n := range r.NotServed {
			if strings.HasPrefix(u, n.Version+" is in status.storedVersions but not served") {
				u = fmt.Sprintf("%s is in status.storedVersions but not served: what the objects stored at it hold cannot be read, so whether they lose fields is unknown; serve it again to read them: %s", n.Version, n.Serve)
			}
		}
		k.incomplete(CheckDataLoss, fmt.Errorf("%s", u))
	}
	if r.LossCount == 0 {
		return false
	}
	var objs []string
	for _, l := range r.Losses {
		objs = append(objs, fmt.Sprintf("%s (%s)", objKey(l.Namespace, l.Name), strings.Join(l.Fields, ", ")))
	}
	more := ""
	if r.LossCount > int64(len(r.Losses)) {
		more = fmt.Sprintf(" and %d more", r.LossCount-int64(len(r.Losses)))
	}
	k.add(CheckDataLoss, SeverityError, strings.Join(preflight.Advice(r), " "),
		fmt.Sprintf("%d objects lose fields when read at the storage version %s (the next write of each, e.g. a migration, drops them for good): %s%s",
			r.LossCount, r.Target, strings.Join(objs, "; "), more))
	return true
}

// transport reaches the CRD's conversion webhook for the data-loss check (nil for strategy
// None, when round trips are skipped, or when it cannot be built: the answer is then unknown).
func (k *checker) transport() convert.Transport {
	if !webhookcheck.IsWebhook(k.crd) || k.opts.SkipRoundTrip {
		return nil
	}
	reach := webhookcheck.Reach{Timeout: k.opts.WebhookTimeout}
	if k.c.core != nil {
		reach.Proxy = k.c.core.CoreV1().RESTClient()
	}
	t, err := webhookcheck.Transport(k.ctx, k.crd, nil, reach)
	if err != nil {
		return nil
	}
	return t
}

func objKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
