package plugin

// migrate_fixvalues.go: migrate --fix-values: the values whose type does not fit the storage
// version's typed schema converted before the rewrite (upgrade.FixValues), keeping their field
// managers; the runbook's storage step for a release that changes a field's type.

import (
	"context"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// checkValues is --fix-values' part of the preflight: what the conversion would do at target,
// writing nothing. The objects it converts are no reason to refuse for the field managers the
// rewrite's dry run drops on them (the conversion moves the managers first, and the rewrite
// then types them): they are taken out of rep. The objects it would leave refuse the run.
func (o *MigrateOptions) checkValues(ctx context.Context, c *migrate.Clients, crd *apiextensionsv1.CustomResourceDefinition, target string, rep *preflight.Report) error {
	fx, err := upgrade.FixValues(ctx, c, upgrade.FixValuesOptions{CRD: crd.Name, Version: target, ChunkSize: o.ChunkSize, DryRun: true})
	if err != nil {
		return clusterError(fmt.Sprintf("reading the values of %s at %s", crd.Name, target), err)
	}
	converts := map[string]bool{}
	for _, f := range fx.Fixed {
		converts[f.Namespace+"/"+f.Name] = true
		o.progress.Notef("%s %s: --fix-values converts %s before the rewrite, keeping its field managers", crd.Name, upgrade.ObjectRef(f.Namespace, f.Name), strings.Join(f.Values, ", "))
	}
	kept := rep.OwnershipLosses[:0]
	for _, l := range rep.OwnershipLosses {
		if converts[l.Namespace+"/"+l.Name] {
			rep.OwnershipLossCount--
			continue
		}
		kept = append(kept, l)
	}
	rep.OwnershipLosses = kept
	if len(fx.Left) == 0 {
		return nil
	}
	var names []string
	for _, l := range fx.Left {
		names = append(names, upgrade.ObjectRef(l.Namespace, l.Name)+" ("+strings.Join(l.Errors, "; ")+")")
	}
	return outcome.Errorf(outcome.Findings, "refusing before any write: %d objects hold values whose type does not fit %s's typed schema and that --fix-values does not convert: %s; nothing was written: change each value so that it converts (the plan's fix-values step says how), then run the same command again",
		len(fx.Left), target, strings.Join(names, ", "))
}

// fixValues converts the values once the storage version is the target (Migrator.BeforeRewrite),
// with its journal beside the rewrite's checkpoint.
func (o *MigrateOptions) fixValues(ctx context.Context, c *migrate.Clients, crd *apiextensionsv1.CustomResourceDefinition) error {
	cp := o.Checkpoint
	if cp == "" {
		p, err := migrate.DefaultCheckpointPath(c.Server, crd.Name)
		if err != nil {
			return err
		}
		cp = p
	}
	fx, err := upgrade.FixValues(ctx, c, upgrade.FixValuesOptions{CRD: crd.Name, Version: crdinfo.StorageVersion(crd), Journal: upgrade.FixValuesJournal(cp),
		ChunkSize: o.ChunkSize, Notify: func(l string) { o.progress.Notef("%s", l) }})
	if err != nil {
		return err
	}
	return fx.Err()
}
