package preview

import (
	"fmt"
	"strings"

	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// ReadResult is what the API server returns when it reads an object from etcd.
type ReadResult struct {
	// Object is the object as a GET at ReadVersion returns it.
	Object map[string]any
	// EncodedVersion is the version the object is encoded at in etcd; ReadVersion the version
	// it is shown in.
	EncodedVersion, ReadVersion string
	// Pruned lists the fields the decoder drops: pruning in the encoded version's schema and,
	// after conversion, in the read version's.
	Pruned []string
	// DroppedNulls lists null values of non-nullable fields without default that were dropped.
	DroppedNulls []string
	// Defaulted lists the fields set from the encoded version's defaults.
	Defaulted []string
	// Converted is false when the read version differs from the encoded one but the CRD
	// converts through a webhook: Object is then shown in the encoded version.
	Converted bool
}

// Read is the storage decoder of crdConversionRESTOptionsGetter (customresource_handler.go)
// for an object encoded in etcd at its apiVersion (any version in spec.versions, not only
// the storage version): the schema coercer with dropInvalidMetadata and repairGeneration in the
// encoded version, the defaulter in the encoded version, then conversion to version read
// (strategy None: apiVersion only) and the coercer there. read "" is the encoded version.
func (p *Previewer) Read(stored []byte, read string) (*ReadResult, error) {
	gvk, err := head(stored)
	if err != nil {
		return nil, &InputError{Err: err}
	}
	if gvk.Group != p.crd.Spec.Group || gvk.Kind != p.kind {
		return nil, inputErrorf("%s %s does not belong to CustomResourceDefinition %s (group %s, kind %s)",
			gvk.GroupVersion(), gvk.Kind, p.crd.Name, p.crd.Spec.Group, p.kind)
	}
	enc := gvk.Version
	if _, err := p.usable(enc); err != nil {
		return nil, err
	}
	if read == "" {
		read = enc
	}
	if read != enc {
		if _, err := p.usable(read); err != nil {
			return nil, err
		}
		if !crdinfo.IsServed(p.crd, read) {
			return nil, inputErrorf("%s: version %q is not served: it cannot be read (served: %s)", p.crd.Name, read, strings.Join(p.served(), ", "))
		}
	}
	obj, _, err := p.decoder[FieldValidationIgnore].Decode(stored, &gvk, &unstructured.Unstructured{})
	if err != nil {
		return nil, &InputError{Err: fmt.Errorf("cannot decode the stored object: %w", err)}
	}
	u := obj.(*unstructured.Unstructured)
	r := &ReadResult{EncodedVersion: enc, ReadVersion: read, Converted: true}
	var before map[string]any
	if hasNull(u.Object) {
		before = runtime.DeepCopyJSON(u.Object)
	}
	pruned, err := p.coerce(u, true, true)
	if err != nil {
		return nil, err
	}
	if before != nil {
		r.DroppedNulls = droppedNulls(before, u.Object, "")
	}
	beforeDefault := runtime.DeepCopyJSON(u.Object)
	structuraldefaulting.Default(u.Object, p.schemas[enc].Structural)
	r.Defaulted = defaultedPaths(beforeDefault, u.Object, "")
	if read != enc {
		if p.webhook {
			r.Converted, r.ReadVersion = false, enc
		} else {
			u.SetAPIVersion(schema.GroupVersion{Group: p.crd.Spec.Group, Version: read}.String())
			more, err := p.coerce(u, false, false)
			if err != nil {
				return nil, err
			}
			pruned = append(pruned, more...)
		}
	}
	if err := jsonRoundTrip(u); err != nil {
		return nil, err
	}
	r.Object = u.Object
	r.Pruned = sortedCopy(pruned)
	r.DroppedNulls, r.Defaulted = nonNil(r.DroppedNulls), nonNil(r.Defaulted)
	return r, nil
}
