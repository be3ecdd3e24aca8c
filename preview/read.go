package preview

import (
	"bytes"
	"fmt"
	"strings"

	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"

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
	if err := p.inUse(); err != nil {
		return nil, err
	}
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
	r.Defaulted = p.defaultTracked(u.Object, enc)
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

// readOld turns the old object into what the API server would hold: coerced and defaulted in
// its version (the read path), converted to the request version, with system metadata filled.
// gvk is the request's, head(newData): when the old object is the same JSON (a no-op
// update), its head is the same too.
func (p *Previewer) readOld(data, newData []byte, gvk schema.GroupVersionKind, ns string) (*unstructured.Unstructured, error) {
	oldGVK := gvk
	if !bytes.Equal(data, newData) {
		var err error
		if oldGVK, err = head(data); err != nil {
			return nil, &InputError{Err: fmt.Errorf("old object: %w", err)}
		}
	}
	if err := p.checkObjectKind(oldGVK); err != nil {
		return nil, &InputError{Err: fmt.Errorf("old object: %w", err)}
	}
	obj, _, err := p.decoder[FieldValidationIgnore].Decode(data, &oldGVK, &unstructured.Unstructured{})
	if err != nil {
		return nil, &InputError{Err: fmt.Errorf("old object: cannot decode it: %w", err)}
	}
	old := obj.(*unstructured.Unstructured)
	if _, err := p.coerce(old, true, true); err != nil {
		return nil, &InputError{Err: fmt.Errorf("old object: %w", err)}
	}
	structuraldefaulting.Default(old.Object, p.schemas[oldGVK.Version].Structural)
	if oldGVK.Version != gvk.Version {
		if p.webhook {
			return nil, inputErrorf("old object is %s but the new one is %s: converting needs the conversion webhook; give the old object in %s", oldGVK.GroupVersion(), gvk.GroupVersion(), gvk.Version)
		}
		old.SetAPIVersion(gvk.GroupVersion().String())
		if _, err := p.coerce(old, false, false); err != nil {
			return nil, &InputError{Err: fmt.Errorf("old object: %w", err)}
		}
	}
	if old.GetNamespace() == "" && ns != "" {
		old.SetNamespace(ns)
	}
	if old.GetResourceVersion() == "" {
		old.SetResourceVersion("1")
	}
	if old.GetUID() == "" {
		rest.FillObjectMetaSystemFields(old)
	}
	if old.GetGeneration() == 0 {
		old.SetGeneration(1)
	}
	return old, nil
}

// storageRoundTrip encodes u at the storage version and decodes it back at version read, the
// way the storage codec of crdConversionRESTOptionsGetter does: on encode, conversion to the
// storage version and the coercer there (no defaulting); on decode, the coercer with
// dropInvalidMetadata and repairGeneration, defaulting in the storage version, conversion to
// the read version and the coercer there. With conversion strategy None, conversion only sets
// apiVersion. With a webhook, preview cannot convert: it stops before storage and says so.
// u is changed: the caller keeps only the result.
func (p *Previewer) storageRoundTrip(u *unstructured.Unstructured, read string) (*unstructured.Unstructured, []string, []string, error) {
	var notes, pruned []string
	cur := u.GetObjectKind().GroupVersionKind().Version
	if p.webhook && (cur != p.storage || read != cur) {
		notes = append(notes, fmt.Sprintf("the storage version is %s: the API server converts the object through the conversion webhook before storing it; preview shows it before that conversion (kubectl crdver convert runs the webhook)", p.storage))
		out := u.DeepCopy()
		if err := jsonRoundTrip(out); err != nil {
			return nil, nil, nil, err
		}
		return out, notes, nil, nil
	}
	if cur == p.storage && read == cur {
		// Stored and read in the request version: the JSON round trip changes no serialized
		// byte, so skip it, but the storage decoder's coercion and defaulting still run: they
		// are not idempotent after PrepareForCreate (status defaults come back when the status
		// subresource dropped status). The differential test checks this against the server.
		if _, err := p.coerce(u, true, true); err != nil {
			return nil, nil, nil, err
		}
		p.defaultOnRead(u)
		return u, nil, nil, nil
	}
	// The request's object is not used after its round trip (run keeps what this returns), so
	// it is changed in place, as in the branch above, rather than copied.
	stored := u
	if cur != p.storage {
		if _, err := p.usable(p.storage); err != nil {
			return nil, nil, nil, err
		}
		stored.SetAPIVersion(schema.GroupVersion{Group: p.crd.Spec.Group, Version: p.storage}.String())
		unknown, err := p.coerce(stored, false, false)
		if err != nil {
			return nil, nil, nil, err
		}
		pruned = append(pruned, unknown...)
		notes = append(notes, fmt.Sprintf("stored at the storage version %s: conversion strategy None switches apiVersion, then the object is pruned in %s's schema (not defaulted)", p.storage, p.storage))
	}
	if err := jsonRoundTrip(stored); err != nil {
		return nil, nil, nil, err
	}
	out, unknown, err := p.readAt(stored, read)
	if err != nil {
		return nil, nil, nil, err
	}
	pruned = append(pruned, unknown...)
	switch {
	case read == cur:
	case read == p.storage:
		notes = append(notes, fmt.Sprintf("shown as read at %s, the storage version: defaulted in its schema", read))
	default:
		notes = append(notes, fmt.Sprintf("shown as read at %s: defaulted in the storage version %s's schema, then converted (strategy None) and pruned in %s's schema; %s's own defaults are not applied on read", read, p.storage, read, read))
	}
	return out, notes, sortedCopy(pruned), nil
}

// defaultOnRead is the storage decoder's defaulting in the storage version; it records what it
// set in lastReadDefaults.
func (p *Previewer) defaultOnRead(u *unstructured.Unstructured) {
	p.lastReadDefaults = p.defaultTracked(u.Object, p.storage)
}

// readAt is the storage decoder: stored is an object at the storage version, freshly decoded
// from its JSON; it is changed in place and returned.
func (p *Previewer) readAt(stored *unstructured.Unstructured, read string) (*unstructured.Unstructured, []string, error) {
	out := stored
	if _, err := p.coerce(out, true, true); err != nil {
		return nil, nil, err
	}
	p.defaultOnRead(out)
	var pruned []string
	if read != p.storage {
		out.SetAPIVersion(schema.GroupVersion{Group: p.crd.Spec.Group, Version: read}.String())
		unknown, err := p.coerce(out, false, false)
		if err != nil {
			return nil, nil, err
		}
		pruned = unknown
	}
	if err := jsonRoundTrip(out); err != nil {
		return nil, nil, err
	}
	return out, pruned, nil
}

// jsonRoundTrip encodes and decodes u as JSON, as storage does (numbers become int64 or
// float64 the way the API server returns them).
func jsonRoundTrip(u *unstructured.Unstructured) error {
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	fresh := &unstructured.Unstructured{}
	if err := fresh.UnmarshalJSON(b); err != nil {
		return err
	}
	u.Object = fresh.Object
	return nil
}
