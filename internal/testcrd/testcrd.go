// Package testcrd builds the CustomResourceDefinitions of tests, as Helm's tests build charts:
// New gives a plain namespaced CRD of a group and kind, and options give it versions, a storage
// version, schemas, a conversion webhook, storedVersions and the rest. The same options edit a
// copy of a CRD a test read from a file (With). Pure construction: no API server, no files.
package testcrd

import (
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// An Option changes the CRD being built. Options apply in the order given: those naming
// versions (Storage, Unserved, Spec, Schema, Deprecated) act on the versions already added.
type Option func(*apiextensionsv1.CustomResourceDefinition)

// New is the CRD <plural>.<group> of kind: apiextensions.k8s.io/v1, namespaced, named as the
// API server would default it (plural and singular the lower-case kind, plural with "s" or
// "ies"; listKind <kind>List), conversion None, no version; then opts.
func New(group, kind string, opts ...Option) *apiextensionsv1.CustomResourceDefinition {
	singular := strings.ToLower(kind)
	plural := singular + "s"
	if base, ok := strings.CutSuffix(singular, "y"); ok && !strings.ContainsAny(base[len(base)-1:], "aeiou") {
		plural = base + "ies"
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group:      group,
			Scope:      apiextensionsv1.NamespaceScoped,
			Names:      apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: singular, Kind: kind, ListKind: kind + "List"},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
	}
	for _, o := range opts {
		o(crd)
	}
	return crd
}

// With is a copy of crd changed by opts (crd itself is left as it is).
func With(crd *apiextensionsv1.CustomResourceDefinition, opts ...Option) *apiextensionsv1.CustomResourceDefinition {
	c := crd.DeepCopy()
	for _, o := range opts {
		o(c)
	}
	return c
}

// Group moves the CRD to group: spec.group and its name <plural>.<group>.
func Group(group string) Option {
	return func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Group = group
		c.Name = c.Spec.Names.Plural + "." + group
	}
}

// Plural names the resource plural (and the CRD <plural>.<group>).
func Plural(plural string) Option {
	return func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Names.Plural = plural
		c.Name = plural + "." + c.Spec.Group
	}
}

// ShortNames sets the resource's short names.
func ShortNames(names ...string) Option {
	return func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.ShortNames = names }
}

// Cluster makes the resource cluster-scoped.
func Cluster() Option {
	return func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Scope = apiextensionsv1.ClusterScoped }
}

// Versions adds served versions, in this order, none of them the storage version (Storage) and
// without a schema (Spec, Schema).
func Versions(names ...string) Option {
	return func(c *apiextensionsv1.CustomResourceDefinition) {
		for _, n := range names {
			c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: n, Served: true})
		}
	}
}

// Version adds one version as given: served or not, the storage version or not, with schema
// (nil: none).
func Version(name string, served, storage bool, schema *apiextensionsv1.CustomResourceValidation) Option {
	return func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: served, Storage: storage, Schema: schema})
	}
}

// CopyVersion adds version to, a copy of version from under another name (a release that adds
// a version with the same schema).
func CopyVersion(from, to string) Option {
	return func(c *apiextensionsv1.CustomResourceDefinition) {
		for _, v := range c.Spec.Versions {
			if v.Name == from {
				cp := *v.DeepCopy()
				cp.Name = to
				c.Spec.Versions = append(c.Spec.Versions, cp)
				return
			}
		}
	}
}

// Keep keeps only versions, in this order (a name the CRD lacks is left out), each served and
// not deprecated, the last one the storage version: a release made of some versions of a CRD.
func Keep(versions ...string) Option {
	return func(c *apiextensionsv1.CustomResourceDefinition) {
		var kept []apiextensionsv1.CustomResourceDefinitionVersion
		for _, n := range versions {
			for _, v := range c.Spec.Versions {
				if v.Name == n {
					v := *v.DeepCopy()
					v.Served, v.Storage, v.Deprecated, v.DeprecationWarning = true, n == versions[len(versions)-1], false, nil
					kept = append(kept, v)
					break
				}
			}
		}
		c.Spec.Versions = kept
	}
}

// Storage makes version the storage version, and no other.
func Storage(version string) Option {
	return func(c *apiextensionsv1.CustomResourceDefinition) {
		for i := range c.Spec.Versions {
			c.Spec.Versions[i].Storage = c.Spec.Versions[i].Name == version
		}
	}
}

// Unserved stops serving versions.
func Unserved(versions ...string) Option {
	return eachVersion(versions, func(v *apiextensionsv1.CustomResourceDefinitionVersion) { v.Served = false })
}

// Deprecated marks version deprecated, with warning when not "".
func Deprecated(version, warning string) Option {
	return eachVersion([]string{version}, func(v *apiextensionsv1.CustomResourceDefinitionVersion) {
		v.Deprecated = true
		if warning != "" {
			v.DeprecationWarning = &warning
		}
	})
}

// Spec gives versions (every version when none is named) the schema of an object whose spec
// is an object of props: {type: object, properties: {spec: {type: object, properties: props}}}.
func Spec(props map[string]apiextensionsv1.JSONSchemaProps, versions ...string) Option {
	return Schema(apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", Properties: props},
	}}, versions...)
}

// Schema gives versions (every version when none is named) openAPIV3Schema s, each its own copy.
func Schema(s apiextensionsv1.JSONSchemaProps, versions ...string) Option {
	return eachVersion(versions, func(v *apiextensionsv1.CustomResourceDefinitionVersion) {
		v.Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: s.DeepCopy()}
	})
}

// Webhook converts through url, trusting caBundle (nil: none), with reviewVersions (none:
// ["v1"]).
func Webhook(url string, caBundle []byte, reviewVersions ...string) Option {
	if len(reviewVersions) == 0 {
		reviewVersions = []string{"v1"}
	}
	return Conversion(&apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: reviewVersions,
			ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle}}})
}

// Conversion sets spec.conversion (nil: none given, as in a file that leaves it out).
func Conversion(conv *apiextensionsv1.CustomResourceConversion) Option {
	return func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Conversion = conv }
}

// Stored sets status.storedVersions (none: unknown, as in a file).
func Stored(versions ...string) Option {
	return func(c *apiextensionsv1.CustomResourceDefinition) { c.Status.StoredVersions = versions }
}

// eachVersion applies f to the named versions, or to every version when none is named.
func eachVersion(names []string, f func(*apiextensionsv1.CustomResourceDefinitionVersion)) Option {
	return func(c *apiextensionsv1.CustomResourceDefinition) {
		for i := range c.Spec.Versions {
			if len(names) == 0 || slices.Contains(names, c.Spec.Versions[i].Name) {
				f(&c.Spec.Versions[i])
			}
		}
	}
}

// YAML is crds as one YAML file, a document each (as a release ships them).
func YAML(t testing.TB, crds ...*apiextensionsv1.CustomResourceDefinition) []byte {
	t.Helper()
	var out []byte
	for i, c := range crds {
		b, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, b...)
	}
	return out
}
