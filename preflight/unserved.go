package preflight

import (
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ServeCommand is the command that sets served on version v of crd: a JSON patch of its
// served flag that first tests the version's name, so that a CRD changed since it was read is
// not patched blindly. Objects stored at a version that is not served can be read as stored
// only once it is served again (the API server reads them at a served version otherwise,
// pruned to that version's schema).
func ServeCommand(crd *apiextensionsv1.CustomResourceDefinition, v string, served bool) string {
	i := slices.IndexFunc(crd.Spec.Versions, func(x apiextensionsv1.CustomResourceDefinitionVersion) bool { return x.Name == v })
	return fmt.Sprintf(`kubectl patch crd %s --type=json -p '[{"op":"test","path":"/spec/versions/%d/name","value":"%s"},{"op":"replace","path":"/spec/versions/%d/served","value":%t}]'`,
		crd.Name, i, v, i, served)
}

// NotServed is a version in status.storedVersions that the CRD has but does not serve, with
// the commands that serve it again (so the objects stored at it can be read) and, afterwards,
// stop serving it.
type NotServed struct {
	Version string `json:"version"`
	Serve   string `json:"serve"`
	Unserve string `json:"unserve"`
}

func notServed(crd *apiextensionsv1.CustomResourceDefinition, h string) NotServed {
	return NotServed{Version: h, Serve: ServeCommand(crd, h, true), Unserve: ServeCommand(crd, h, false)}
}

// unservedStoredUnknown says why objects stored at h, which the CRD has but does not serve,
// were neither backed up nor compared.
func unservedStoredUnknown(h string) string {
	return fmt.Sprintf("%s is in status.storedVersions but not served: objects stored at it cannot be read as stored, so neither backed up nor compared (serve it again to read them: see below)", h)
}

// serveAdvice: how to read the objects stored at versions not served, one command a line.
func serveAdvice(r *Report) []string {
	var out []string
	for _, n := range r.NotServed {
		out = append(out, fmt.Sprintf("serve %s again, so the objects stored at it are read as stored, then run this command again:", n.Version), "  "+n.Serve,
			fmt.Sprintf("once no object is stored at %s (status.storedVersions lacks it), stop serving it if you wish:", n.Version), "  "+n.Unserve)
	}
	return out
}

// missingStoredUnknown says why objects stored at h, which is not in crd's spec.versions, are
// not read: no request can name a version the CRD lacks.
func missingStoredUnknown(h string) string {
	return fmt.Sprintf("%s is in status.storedVersions but not in spec.versions: objects stored at it cannot be read by any request (the API server decodes them only into the versions the CRD has), so what they hold is unknown", h)
}
