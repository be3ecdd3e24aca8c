package retire

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/ownership"
)

// BuildPlan works out the target version and which steps are still to do, from crd (fresh from
// the cluster) and a census of the objects' managedFields.
func BuildPlan(ctx context.Context, c *migrate.Clients, crd *apiextensionsv1.CustomResourceDefinition, o Options) (*Plan, error) {
	ver, ok := lookup(crd, o.Version)
	if !ok {
		return nil, fmt.Errorf("%w: %w; if an earlier retire removed it, nothing is left to do", ErrUsage, crdinfo.NotFound(crd, o.Version))
	}
	target, err := pickTarget(crd, o.Version, o.To)
	if err != nil {
		return nil, err
	}
	storage := crdinfo.StorageVersion(crd)
	p := &Plan{CRD: crd.Name, Version: o.Version, Target: target, StorageVersion: storage,
		StoredVersions: append([]string{}, crd.Status.StoredVersions...), Served: ver.Served}
	if m := ManagedBy(crd); m.Managed() {
		p.ManagedBy, p.Manager = m.String(), &m
	}
	census := o.Census
	if census == nil {
		var err error
		if census, err = ownership.Take(ctx, c.Metadata, crdinfo.GVR(crd, target), o.Rewrite.ChunkSize, nil); err != nil {
			return nil, fmt.Errorf("reading the managedFields of %s: %w", crd.Name, err)
		}
	}
	p.Objects = census.Objects
	row := census.Of(o.Version)
	p.EntryObjects, p.Writers = row.Objects, row.Managers

	add := func(name, state, detail string) {
		p.Steps = append(p.Steps, Step{Name: name, State: state, Detail: detail})
	}
	if storage == o.Version {
		add(StepSwitch, StatePending, fmt.Sprintf("make %s the storage version (now %s)", target, storage))
	} else {
		add(StepSwitch, StateAlready, fmt.Sprintf("the storage version is %s", storage))
	}
	stored := slices.Contains(crd.Status.StoredVersions, o.Version)
	newStorage := storage
	if storage == o.Version {
		newStorage = target
	}
	if o.Rewrite.Checkpoint != "" {
		// A migration an earlier run left (detached or stopped) is re-attached to and checked,
		// whichever engine is asked: a client rewrite beside it would write every object
		// twice. From 1.36 its controller trims status.storedVersions once it succeeds, before
		// that run has checked every object: the check is still due then too.
		p.Unchecked, _ = migrate.UncheckedClusterMigration(ctx, c, crd, o.Rewrite.Checkpoint)
	}
	switch {
	case p.Unchecked != nil:
		add(StepRewrite, StatePending, fmt.Sprintf("re-attach to the StorageVersionMigration %s an earlier run created and check that every object is stored at %s", p.Unchecked.Name, newStorage))
		add(StepTrim, StatePending, fmt.Sprintf("if every object is accounted for, set status.storedVersions to [%s]", newStorage))
	case stored:
		detail := fmt.Sprintf("rewrite %d objects so that each is stored at %s (resumes from the checkpoint)", p.Objects, newStorage)
		if storage != o.Version {
			if ev, _ := migrate.CompletedEvidence(c.Server, crd, o.Rewrite.Checkpoint); ev != nil {
				detail = fmt.Sprintf("a completed run is recorded in %s: not rewritten again", o.Rewrite.Checkpoint)
			}
		}
		add(StepRewrite, StatePending, detail)
		add(StepTrim, StatePending, fmt.Sprintf("if every object is accounted for, set status.storedVersions to [%s]", newStorage))
	default:
		add(StepRewrite, StateAlready, fmt.Sprintf("%s is not in status.storedVersions [%s]: no object is stored at it", o.Version, strings.Join(crd.Status.StoredVersions, " ")))
		add(StepTrim, StateAlready, fmt.Sprintf("status.storedVersions is [%s]", strings.Join(crd.Status.StoredVersions, " ")))
	}
	if row.Objects > 0 {
		add(StepManagedFields, StatePending, fmt.Sprintf("move the managedFields entries of %s in %d objects to %s, keeping each manager's fields", o.Version, row.Objects, target))
	} else {
		add(StepManagedFields, StateAlready, fmt.Sprintf("no object has managedFields entries of %s", o.Version))
	}
	switch {
	case !o.Unserve && !o.Remove:
		add(StepUnserve, StateSkipped, "not asked (--unserve)")
	case !ver.Served:
		add(StepUnserve, StateAlready, fmt.Sprintf("%s is not served", o.Version))
	default:
		add(StepUnserve, StatePending, fmt.Sprintf("set served: false on %s", o.Version))
	}
	if o.Remove {
		add(StepRemove, StatePending, fmt.Sprintf("remove %s from spec.versions", o.Version))
	} else {
		add(StepRemove, StateSkipped, "not asked (--remove)")
	}
	return p, nil
}

// pickTarget is to, or the highest-priority served version other than v.
func pickTarget(crd *apiextensionsv1.CustomResourceDefinition, v, to string) (string, error) {
	if to != "" {
		if to == v {
			return "", fmt.Errorf("%w: --to %s is the version being retired: name the version to move to", ErrUsage, to)
		}
		if err := migrate.CheckTarget(crd, to); err != nil {
			return "", fmt.Errorf("%w: %w", ErrUsage, err)
		}
		return to, nil
	}
	var served []string
	for _, x := range crdinfo.ServedVersions(crd) {
		if x != v {
			served = append(served, x)
		}
	}
	if len(served) == 0 {
		return "", fmt.Errorf("%w: %s: no other version is served, so there is nothing to move %s's objects to: add and serve a new version first", ErrUsage, crd.Name, v)
	}
	return served[0], nil
}

// lookup is crd's version v, and whether it is in spec.versions.
func lookup(crd *apiextensionsv1.CustomResourceDefinition, v string) (apiextensionsv1.CustomResourceDefinitionVersion, bool) {
	ver, err := crdinfo.Lookup(crd, v)
	if err != nil {
		return apiextensionsv1.CustomResourceDefinitionVersion{}, false
	}
	return *ver, true
}
