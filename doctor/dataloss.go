package doctor

import (
	"fmt"
	"slices"
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
		Transport: k.transport(), MaxListed: shownLosses, Progress: k.preflightRead()})
	if err != nil {
		k.incomplete(CheckDataLoss, fmt.Errorf("reading the objects of %s at its stored versions: %w", crd.Name, err))
		return false
	}
	k.lossUnknowns(r)
	if r.LossCount == 0 {
		return false
	}
	k.add(CheckDataLoss, SeverityError, strings.Join(preflight.Advice(r), " "),
		fmt.Sprintf("%d objects lose fields when read at the storage version %s (the next write of each, e.g. a migration, drops them for good): %s",
			r.LossCount, r.Target, lossList(r)))
	return true
}

// checkNoneReads: with conversion None (what a CRD update without its spec.conversion leaves),
// the API server reads an object at another version by relabelling it and pruning what that
// version's schema lacks. For a preferred version (what kubectl, the garbage collector and
// most clients read and write) other than the storage version, every object is read at the
// versions holding its data and at the preferred version (the data-loss check's preflight,
// targeted there): fields lost there are dropped from etcd by the next write at it. The
// storage version itself is the pending migration's data-loss check.
func (k *checker) checkNoneReads() {
	crd := k.crd
	pref, storage := crdinfo.PreferredVersion(crd), crdinfo.StorageVersion(crd)
	if k.c.dyn == nil || webhookcheck.IsWebhook(crd) || pref == "" || pref == storage || !crdinfo.IsServed(crd, pref) {
		return
	}
	r, err := preflight.Check(k.ctx, k.c.dyn, crd, preflight.Options{Target: pref, ChunkSize: k.opts.ChunkSize, SkipRejections: true, MaxListed: shownLosses,
		Progress: k.preflightRead()})
	if err != nil {
		k.incomplete(CheckDataLoss, fmt.Errorf("reading the objects of %s at %s: %w", crd.Name, pref, err))
		return
	}
	k.lossUnknowns(r)
	if r.LossCount == 0 {
		return
	}
	held := map[string]bool{}
	for _, l := range r.Losses {
		held[l.HeldAt] = true
	}
	var from []string
	for _, h := range r.Compared {
		if held[h] {
			from = append(from, h)
		}
	}
	fix := fmt.Sprintf("if a conversion webhook converted %s's versions before (a CRD update without spec.conversion leaves strategy None), restore its spec.conversion: kubectl edit crd %s; otherwise %s Or drop the fields listed, with consent, after the backup: kubectl crdver migrate %s --to %s --allow-data-loss",
		crd.Name, crd.Name, strings.Join(preflight.Advice(r), " "), crd.Name, pref)
	k.add(CheckDataLoss, SeverityError, fix,
		fmt.Sprintf("conversion is None: %d objects lose fields when read at the preferred version %s (the API server only relabels them from %s and prunes what %s's schema lacks; the next write of each at %s, e.g. kubectl apply or edit or a controller's update, drops them for good): %s",
			r.LossCount, pref, strings.Join(from, ", "), pref, pref, lossList(r)))
}

// lossUnknowns lists what the preflight could not evaluate as incomplete (once per run of the
// CRD's checks).
func (k *checker) lossUnknowns(r *preflight.Report) {
	for _, u := range r.Unknown {
		// A stored version that is unserved or gone included: what its objects hold cannot be
		// read, so whether they lose fields is unknown.
		for _, n := range r.NotServed {
			if strings.HasPrefix(u, n.Version+" is in status.storedVersions but not served") {
				u = fmt.Sprintf("%s is in status.storedVersions but not served: what the objects stored at it hold cannot be read, so whether they lose fields is unknown; serve it again to read them: %s", n.Version, n.Serve)
			}
		}
		if !slices.ContainsFunc(k.res.incomplete, func(in Incomplete) bool { return in.Check == CheckDataLoss && in.Error == u }) {
			k.incomplete(CheckDataLoss, fmt.Errorf("%s", u))
		}
	}
}

// lossList names the objects a preflight found losing fields, with the fields.
func lossList(r *preflight.Report) string {
	var objs []string
	for _, l := range r.Losses {
		objs = append(objs, fmt.Sprintf("%s (%s)", objKey(l.Namespace, l.Name), strings.Join(l.Fields, ", ")))
	}
	more := ""
	if r.LossCount > int64(len(r.Losses)) {
		more = fmt.Sprintf(" and %d more", r.LossCount-int64(len(r.Losses)))
	}
	return strings.Join(objs, "; ") + more
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
