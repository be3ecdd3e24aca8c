package plugin

import (
	"context"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/explain"
	"github.com/crdver/kubectl-crdver/ownership"
)

// The managedFields census of a CRD read from the cluster, for versions and migrate status; the
// notes and the safe-to-remove rule it feeds are explain's (ManagedFieldsNotes,
// ManagedFieldsSafety).

// managedFieldsCensus counts the objects of crd holding managedFields entries of each version
// (a paged metadata-only list). nil when no version is served: the objects cannot be listed.
func managedFieldsCensus(ctx context.Context, g *Globals, crd *apiextensionsv1.CustomResourceDefinition) (*ownership.Census, error) {
	served, err := crdinfo.AccessVersion(crd)
	if err != nil {
		return nil, nil // nothing served: no object can be listed
	}
	c, err := g.migrateClients()
	if err != nil {
		return nil, err
	}
	census, err := ownership.Take(ctx, c.Metadata, crdinfo.GVR(crd, served), 500, nil)
	if err != nil {
		return nil, clusterError(fmt.Sprintf("reading the managedFields of %s", crd.Name), err)
	}
	return census, nil
}

// clusterManagedFields is the census and its notes for a CRD read from the cluster; nothing for
// one read from files. It never fails the command: when the objects cannot be listed (no
// rights, say), the note says that their managedFields were not counted.
func clusterManagedFields(ctx context.Context, g *Globals, offline bool, crd *apiextensionsv1.CustomResourceDefinition) (*ownership.Census, []string) {
	if offline {
		return nil, nil
	}
	c, err := managedFieldsCensus(ctx, g, crd)
	if err != nil {
		return nil, []string{fmt.Sprintf("managedFields not counted (unknown): %s", strings.TrimPrefix(ErrorLine(err), "error: "))}
	}
	return c, explain.ManagedFieldsNotes(crd, c)
}
