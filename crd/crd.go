// Package crd holds the facts about a CustomResourceDefinition's versions that every command
// needs: the versions in Kubernetes priority order, looking one up, the storage version, which
// versions are served, the preferred version of a group, the resource of a version, and
// decoding CRD documents (apiextensions.k8s.io v1 and v1beta1). Every message about a missing
// version comes from here and reads the same (VersionNotFoundError).
//
// It is a leaf: it imports only apimachinery and the apiextensions types and helpers
// (apihelpers), never the API server's schema, validation or CEL code, so that importing it
// stays cheap (package migrate relies on that). Callers usually import it as crdinfo, because
// "crd" is the name of many variables.
package crd

import (
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// VersionNotFoundError says that a CRD has no version of that name. Its message is the one
// wording of the project: `<crd>: version "v3" is not in spec.versions (have: v1, v1beta1)`,
// the versions in priority order.
type VersionNotFoundError struct {
	CRD     string
	Version string
	// Have are the CRD's versions, in priority order.
	Have []string
}

func (e *VersionNotFoundError) Error() string {
	switch {
	case len(e.Have) == 0:
		return fmt.Sprintf("%s: spec.versions is empty: the CustomResourceDefinition defines no version", e.CRD)
	case e.Version == "":
		return fmt.Sprintf("%s: no version given (have: %s)", e.CRD, strings.Join(e.Have, ", "))
	}
	return fmt.Sprintf("%s: version %q is not in spec.versions (have: %s)", e.CRD, e.Version, strings.Join(e.Have, ", "))
}

// NotFound is the error for a version crd does not have.
func NotFound(crd *apiextensionsv1.CustomResourceDefinition, version string) *VersionNotFoundError {
	return &VersionNotFoundError{CRD: crd.Name, Version: version, Have: VersionNames(crd)}
}

// Lookup returns the named version of crd, or a *VersionNotFoundError.
func Lookup(crd *apiextensionsv1.CustomResourceDefinition, version string) (*apiextensionsv1.CustomResourceDefinitionVersion, error) {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			return &crd.Spec.Versions[i], nil
		}
	}
	return nil, NotFound(crd, version)
}

// Has reports whether crd has a version of that name.
func Has(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	_, err := Lookup(crd, version)
	return err == nil
}

// VersionNames lists spec.versions[].name in priority order (see SortByPriority).
func VersionNames(crd *apiextensionsv1.CustomResourceDefinition) []string {
	names := make([]string, 0, len(crd.Spec.Versions))
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
	}
	SortByPriority(names)
	return names
}

// ServedVersions lists the served versions in priority order.
func ServedVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var names []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			names = append(names, v.Name)
		}
	}
	SortByPriority(names)
	return names
}

// IsServed reports whether crd has version and serves it (apihelpers.HasServedCRDVersion).
func IsServed(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	return apihelpers.HasServedCRDVersion(crd, version)
}

// StorageVersion is the version marked storage: true, or "" when none is
// (apihelpers.GetCRDStorageVersion).
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	v, err := apihelpers.GetCRDStorageVersion(crd)
	if err != nil {
		return ""
	}
	return v
}

// MigrationPending reports whether status.storedVersions lists anything but the storage
// version: objects may still be stored in etcd at an older version.
func MigrationPending(crd *apiextensionsv1.CustomResourceDefinition) bool {
	storage := StorageVersion(crd)
	for _, s := range crd.Status.StoredVersions {
		if s != storage {
			return true
		}
	}
	return false
}

// NoServedVersionError says that a CRD serves no version, so its objects cannot be read or
// written through the API.
type NoServedVersionError struct{ CRD string }

func (e *NoServedVersionError) Error() string {
	return fmt.Sprintf("%s: no version is served, so its objects cannot be read or written (set served: true on a version)", e.CRD)
}

// AccessVersion is the version to read and write objects through: the storage version when it
// is served (no conversion at all), otherwise the first served version of spec.versions.
func AccessVersion(crd *apiextensionsv1.CustomResourceDefinition) (string, error) {
	storage := StorageVersion(crd)
	var first string
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		if v.Name == storage {
			return v.Name, nil
		}
		if first == "" {
			first = v.Name
		}
	}
	if first == "" {
		return "", &NoServedVersionError{CRD: crd.Name}
	}
	return first, nil
}

// DefaultSource is the version to convert from when converting to `to`: the highest-priority
// served version other than to, else the highest-priority other version, else to itself.
func DefaultSource(crd *apiextensionsv1.CustomResourceDefinition, to string) string {
	for _, v := range ServedVersions(crd) {
		if v != to {
			return v
		}
	}
	for _, v := range VersionNames(crd) {
		if v != to {
			return v
		}
	}
	return to
}

// GVR is the resource of crd at version v.
func GVR(crd *apiextensionsv1.CustomResourceDefinition, v string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: crd.Spec.Group, Version: v, Resource: crd.Spec.Names.Plural}
}

// GVK is the kind of crd at version v.
func GVK(crd *apiextensionsv1.CustomResourceDefinition, v string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: crd.Spec.Group, Version: v, Kind: crd.Spec.Names.Kind}
}
