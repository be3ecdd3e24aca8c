package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	census, err := ownership.Take(ctx, c.Metadata, crdinfo.GVR(crd, served), 500)
	if err != nil {
		return nil, clusterError(fmt.Sprintf("reading the managedFields of %s", crd.Name), err)
	}
	return census, nil
}

func printNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
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

// withManagedFields adds the census to a report's JSON/YAML as a last key "managedFields"
// (nothing for CRDs read from files). The report's own keys keep their order.
func withManagedFields(report any, c *ownership.Census) (any, error) {
	if c == nil {
		return report, nil
	}
	r, err := json.Marshal(report)
	if err != nil {
		return nil, err
	}
	mf, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	r = bytes.TrimRight(r, " \n")
	if len(r) < 2 || r[len(r)-1] != '}' {
		return report, nil
	}
	sep := ","
	if bytes.Equal(bytes.TrimSpace(r[:len(r)-1]), []byte("{")) {
		sep = ""
	}
	out := append(append(append(append([]byte{}, r[:len(r)-1]...), sep+`"managedFields":`...), mf...), '}')
	return json.RawMessage(out), nil
}
