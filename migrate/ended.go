package migrate

import (
	"errors"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	ended "github.com/crdver/kubectl-crdver/outcome"
)

// end is how the Migrator's run of crd ended, by its error or, when it ran to its end,
// by its report: a refusal of PreWrite or BeforeRewrite (their *outcome.Error), a target that
// is not a served version of crd (usage), anything else that stopped it (could not complete);
// field managers dropped without consent, objects that could not be rewritten, a
// StorageVersionMigration that failed, a trim not proved safe (the user must act).
func (m *Migrator) end(crd string, rep *Report, err error) ended.Outcome {
	var se *StepError
	var nf *crdinfo.VersionNotFoundError
	var ns *NotServedError
	var de *DetachedError
	switch {
	case errors.As(err, &de):
		// Not done, not failed: the cluster carries on; the same run started again goes on.
		return de.Outcome("")
	case err != nil:
		if out, ok := ended.Of(err); ok {
			if errors.As(err, &se) && se.Step == StepPreWrite {
				out.Message = crd + ": " + out.Message
			}
			return out
		}
		if errors.As(err, &nf) || errors.As(err, &ns) {
			return ended.New(ended.Usage, "%v", err)
		}
		return ended.New(ended.Incomplete, "%v", err)
	case rep.Result != nil && rep.Result.ManagedFieldsLost > 0 && (m.OwnershipLossConsented == nil || !m.OwnershipLossConsented(rep.Result)):
		return ended.New(ended.Findings, "%s: %d objects lost field managers through the rewrite (listed above): their managedFields are gone; re-apply them from their source (GitOps repository, Helm release) to restore ownership", crd, rep.Result.ManagedFieldsLost)
	case rep.Failed() > 0:
		return ended.New(ended.Findings, "%s: %d objects could not be rewritten (listed above); status.storedVersions was not trimmed", crd, rep.Failed())
	case rep.Cluster != nil && !rep.Cluster.Succeeded && rep.Cluster.Check == nil:
		return ended.New(ended.Findings, "%s: the StorageVersionMigration %s failed: %s", crd, rep.Cluster.Name, rep.Cluster.Message)
	case rep.Trim != nil && !rep.Trim.Safe:
		return ended.New(ended.Findings, "%s: status.storedVersions was not trimmed: %s", crd, rep.Trim.Reason)
	}
	return ended.Done()
}
