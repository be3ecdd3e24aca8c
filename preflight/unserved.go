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

// unservedStoredUnknown says why objects stored at h, which crd has but does not serve, were
// neither backed up nor compared, and how to read them.
func unservedStoredUnknown(crd *apiextensionsv1.CustomResourceDefinition, h string) string {
	return fmt.Sprintf("%s is in status.storedVersions but not served: objects stored at it cannot be read as stored, so neither backed up nor compared; serve it again to read them (`%s`), run this command again, then stop serving it if you wish (`%s`)",
		h, ServeCommand(crd, h, true), ServeCommand(crd, h, false))
}

// missingStoredUnknown says why objects stored at h, which is not in crd's spec.versions, are
// not read: no request can name a version the CRD lacks.
func missingStoredUnknown(h string) string {
	return fmt.Sprintf("%s is in status.storedVersions but not in spec.versions: objects stored at it cannot be read by any request (the API server decodes them only into the versions the CRD has), so what they hold is unknown", h)
}
