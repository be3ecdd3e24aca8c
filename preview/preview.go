// Package preview runs the API server's own create, update and read paths for the objects of a
// CRD, offline: decoding with fieldValidation, pruning, dropped nulls, metadata coercion,
// defaulting, the status subresource, validation (OpenAPI, list types, embedded resources, CEL
// with ratcheting) and the storage round trip, each step calling the apiextensions-apiserver
// code in the API server's order with a comment naming the source. A Previewer is built once per
// CRD and then used for many objects (the preview command, and the plan command's prediction of
// what happens to every live object).
//
// preview.go (~550 lines) is long because it is one cohesive thing: the create/update pipeline
// in the API server's order; types.go holds the options and results, read.go the read path
// (the storage round trip and reading an object back in another version).
package preview

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/crdserverscheme"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/endpoints/handlers"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/crdschema"
	"github.com/crdver/kubectl-crdver/kubeversion"
)

// Previewer runs the API server's create and update path for the objects of one CRD: decoding
// with fieldValidation, pruning, dropping nulls, metadata coercion, defaulting, the status
// subresource, validation (registry/customresource's strategy: OpenAPI, list types, embedded
// resources, CEL) and the storage round trip. Build it once per CRD: it compiles every CEL
// rule. It is not safe for concurrent use.
type Previewer struct {
	crd      *apiextensionsv1.CustomResourceDefinition
	kind     string
	storage  string
	webhook  bool
	schemas  map[string]*crdschema.VersionSchema
	strategy map[string]strategy
	decoder  map[FieldValidation]runtime.Decoder
	// defaults are the versions' default trees (defaults.go), built as versions are used.
	defaults map[string]*defaultTree

	lastReadDefaults []string

	// kubeVersion is the Kubernetes version the API server's code runs as: the one asked for
	// (WithKubeVersion), else the one the process ran as when the previewer was built.
	kubeVersion kubeversion.Version
}

// Option tunes a Previewer.
type Option func(*Previewer)

// WithKubeVersion makes the previews those of a Kubernetes v API server, and a verdict that
// depends on a known difference between versions (kubeversion.Differences) carries its note.
// The process must run as v (kubeversion.Use, chosen once per run by the caller: feature-gate
// defaults, the CEL environment, the formats the schema validator knows): NewPreviewer and
// every preview refuse another (*kubeversion.NotInUseError). Without it, the previews are
// those of the version the process runs as when the previewer is built.
func WithKubeVersion(v kubeversion.Version) Option {
	return func(p *Previewer) { p.kubeVersion = v }
}

// KubeVersion is the Kubernetes version the previews are judged as.
func (p *Previewer) KubeVersion() kubeversion.Version { return p.kubeVersion }

// inUse checks that the process still runs as the previewer's Kubernetes version: its CEL
// rules were compiled as that version.
func (p *Previewer) inUse() error {
	_, err := kubeversion.Require(p.kubeVersion)
	return err
}

type strategy interface {
	rest.RESTCreateStrategy
	rest.RESTUpdateStrategy
}

// NewPreviewer prepares the previews of crd's objects. It fails when the CRD has no storage
// version; versions whose schema is missing or not structural fail later, when an object uses
// them.
func NewPreviewer(crd *apiextensionsv1.CustomResourceDefinition, opts ...Option) (*Previewer, error) {
	p := &Previewer{
		crd:      crd,
		kind:     crd.Spec.Names.Kind,
		storage:  crdinfo.StorageVersion(crd),
		webhook:  crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter,
		schemas:  map[string]*crdschema.VersionSchema{},
		strategy: map[string]strategy{},
		decoder:  map[FieldValidation]runtime.Decoder{},
		defaults: map[string]*defaultTree{},
	}
	for _, o := range opts {
		o(p)
	}
	kv, err := kubeversion.Require(p.kubeVersion)
	if err != nil {
		return nil, err
	}
	p.kubeVersion = kv
	if p.storage == "" {
		return nil, fmt.Errorf("%s: no version is marked storage: true", crd.Name)
	}
	typer := crdserverscheme.NewUnstructuredObjectTyper()
	creator := unstructuredCreator{}
	// The CRD handler's JSON serializers: the strict one for Warn and Strict, the lenient one
	// for Ignore (handlers/create.go).
	p.decoder[FieldValidationIgnore] = json.NewSerializerWithOptions(json.DefaultMetaFactory, creator, typer, json.SerializerOptions{})
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, creator, typer, json.SerializerOptions{Strict: true})
	p.decoder[FieldValidationWarn], p.decoder[FieldValidationStrict] = strict, strict
	for _, v := range crd.Spec.Versions {
		vs, err := crdschema.SchemaFor(crd, v.Name)
		if err != nil {
			return nil, err
		}
		p.schemas[v.Name] = vs
	}
	return p, nil
}

type unstructuredCreator struct{}

func (unstructuredCreator) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// usable returns the structural schema of version v, or an error saying why the API server
// would not serve objects with it.
func (p *Previewer) usable(v string) (*structuralschema.Structural, error) {
	vs, ok := p.schemas[v]
	if !ok {
		_, err := crdinfo.Lookup(p.crd, v)
		return nil, &InputError{Err: err}
	}
	if vs.Internal == nil {
		return nil, inputErrorf("%s: version %q has no schema (spec.versions[].schema.openAPIV3Schema): nothing to preview", p.crd.Name, v)
	}
	if len(vs.Violations) > 0 {
		return nil, &NonStructuralError{CRD: p.crd.Name, Version: v, Violations: vs.Violations}
	}
	return vs.Structural, nil
}

// strategyFor builds (once) registry/customresource's strategy for version v, exactly as the
// CRD handler does.
func (p *Previewer) strategyFor(v string) (strategy, error) {
	if s, ok := p.strategy[v]; ok {
		return s, nil
	}
	structural, err := p.usable(v)
	if err != nil {
		return nil, err
	}
	internal := p.schemas[v].Internal
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, fmt.Errorf("%s: version %q: building the schema validator: %w", p.crd.Name, v, err)
	}
	subresources, err := apihelpers.GetSubresourcesForVersion(p.crd, v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.crd.Name, err)
	}
	var statusSpec *apiextensions.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	var scaleSpec *apiextensions.CustomResourceSubresourceScale
	if subresources != nil && subresources.Status != nil {
		statusSpec = &apiextensions.CustomResourceSubresourceStatus{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceStatus_To_apiextensions_CustomResourceSubresourceStatus(subresources.Status, statusSpec, nil); err != nil {
			return nil, err
		}
		if internal.Properties != nil {
			if statusSchema, ok := internal.Properties["status"]; ok {
				if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&statusSchema); err != nil {
					return nil, err
				}
			}
		}
	}
	if subresources != nil && subresources.Scale != nil {
		scaleSpec = &apiextensions.CustomResourceSubresourceScale{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(subresources.Scale, scaleSpec, nil); err != nil {
			return nil, err
		}
	}
	var selectable []apiextensionsv1.SelectableField
	for _, ver := range p.crd.Spec.Versions {
		if ver.Name == v {
			selectable = ver.SelectableFields
		}
	}
	kind := schema.GroupVersionKind{Group: p.crd.Spec.Group, Version: v, Kind: p.kind}
	s := customresource.NewStrategy(crdserverscheme.NewUnstructuredObjectTyper(), p.crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		kind, validator, statusValidator, structural, statusSpec, scaleSpec, selectable)
	p.strategy[v] = s
	return s, nil
}

// coerce is the API server's unstructuredSchemaCoercer.apply (customresource_handler.go): it
// validates and prunes ObjectMeta, prunes unknown fields following the structural schema of
// the object's version, drops non-nullable nulls without default and coerces embedded
// resources, then restores apiVersion, kind and metadata. It returns the unknown field paths.
func (p *Previewer) coerce(u *unstructured.Unstructured, dropInvalidMetadata, repairGeneration bool) (unknown []string, err error) {
	obj := u.Object
	kind, foundKind, err := unstructured.NestedString(obj, "kind")
	if err != nil {
		return nil, err
	}
	apiVersion, foundAPIVersion, err := unstructured.NestedString(obj, "apiVersion")
	if err != nil {
		return nil, err
	}
	objectMeta, foundObjectMeta, metaUnknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{
		DropMalformedFields:     dropInvalidMetadata,
		ReturnUnknownFieldPaths: true,
	})
	if err != nil {
		return nil, err
	}
	unknown = append(unknown, metaUnknown...)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	if gv.Group == p.crd.Spec.Group && kind == p.kind {
		vs := p.schemas[gv.Version]
		if vs == nil || vs.Structural == nil {
			return nil, fmt.Errorf("%s: version %q has no usable schema", p.crd.Name, gv.Version)
		}
		s := vs.Structural
		if !p.crd.Spec.PreserveUnknownFields {
			unknown = append(unknown, structuralpruning.PruneWithOptions(obj, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, s)
		}
		ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, obj, s, false, schemaobjectmeta.CoerceOptions{
			DropInvalidFields:       dropInvalidMetadata,
			ReturnUnknownFieldPaths: true,
		})
		if ferr != nil {
			return nil, ferr
		}
		unknown = append(unknown, paths...)
		if repairGeneration && objectMeta != nil && objectMeta.Generation == 0 {
			objectMeta.Generation = 1
		}
	}
	if foundKind {
		u.SetKind(kind)
	}
	if foundAPIVersion {
		u.SetAPIVersion(apiVersion)
	}
	if foundObjectMeta {
		if err := schemaobjectmeta.SetObjectMeta(obj, objectMeta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

type warningRecorder struct{ warnings []string }

func (w *warningRecorder) AddWarning(_, text string) { w.warnings = append(w.warnings, text) }

// head is the apiVersion and kind of an object.
func head(data []byte) (schema.GroupVersionKind, error) {
	gvk, err := json.DefaultMetaFactory.Interpret(data)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("not a JSON object: %w", err)
	}
	return *gvk, nil
}

// checkObjectKind makes sure the object belongs to the CRD and names a served version with a
// usable schema.
func (p *Previewer) checkObjectKind(gvk schema.GroupVersionKind) error {
	if gvk.Kind == "" || gvk.Version == "" {
		return inputErrorf("object has no apiVersion or kind (want %s/<version> %s)", p.crd.Spec.Group, p.kind)
	}
	if gvk.Group != p.crd.Spec.Group || gvk.Kind != p.kind {
		return inputErrorf("%s %s does not belong to CustomResourceDefinition %s (group %s, kind %s)",
			gvk.GroupVersion(), gvk.Kind, p.crd.Name, p.crd.Spec.Group, p.kind)
	}
	ver, err := crdinfo.Lookup(p.crd, gvk.Version)
	if err != nil {
		return &InputError{Err: err}
	}
	if !ver.Served {
		return inputErrorf("%s: version %q is not served: the API server would answer 404 (served: %s)", p.crd.Name, gvk.Version, strings.Join(p.served(), ", "))
	}
	_, err = p.usable(gvk.Version)
	return err
}

func (p *Previewer) served() []string {
	var out []string
	for _, n := range crdinfo.VersionNames(p.crd) {
		if v, _ := crdinfo.Lookup(p.crd, n); v != nil && v.Served {
			out = append(out, n)
		}
	}
	return out
}

// decoded is an object after the request decoding (decode, coerce, default).
type decoded struct {
	obj          *unstructured.Unstructured
	pruned       []string
	droppedNulls []string
	defaulted    []string
	warnings     []string
	errs         []PreviewError
}

// decode runs what the API server's request decoder does: JSON decoding (strict for Warn and
// Strict: duplicate fields), the schema coercer of the object's version, then defaulting.
// gvk is head(data).
func (p *Previewer) decode(data []byte, gvk schema.GroupVersionKind, fv FieldValidation) (*decoded, error) {
	if err := p.checkObjectKind(gvk); err != nil {
		return nil, err
	}
	d := &decoded{}
	obj, _, err := p.decoder[fv].Decode(data, &gvk, &unstructured.Unstructured{})
	var strictErrs []error
	if err != nil {
		se, ok := runtime.AsStrictDecodingError(err)
		if !ok || obj == nil {
			return nil, &InputError{Err: fmt.Errorf("cannot decode the object: %w", err)}
		}
		strictErrs = se.Errors()
	}
	u := obj.(*unstructured.Unstructured)
	var before map[string]any
	if hasNull(u.Object) { // only nulls can be dropped: copy only when there are some
		before = runtime.DeepCopyJSON(u.Object)
	}
	unknown, err := p.coerce(u, false, false)
	if err != nil {
		// The API server answers 400 Bad Request (handlers.transformDecodeError).
		d.errs = append(d.errs, PreviewError{Type: string(metav1.StatusReasonBadRequest),
			Message: fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, err)})
		return d, nil
	}
	d.pruned = sortedCopy(unknown)
	if before != nil {
		d.droppedNulls = droppedNulls(before, u.Object, "")
	}
	if fv != FieldValidationIgnore {
		for _, e := range strictErrs {
			d.warnings = append(d.warnings, e.Error())
		}
		for _, f := range unknown {
			d.warnings = append(d.warnings, fmt.Sprintf("unknown field %q", f))
		}
	}
	if fv == FieldValidationStrict && len(d.warnings) > 0 {
		// handlers.transformDecodeError
		d.errs = append(d.errs, PreviewError{Type: string(metav1.StatusReasonBadRequest), Message: fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s",
			gvk.Kind, gvk.Version, gvk.Kind, strings.Join(d.warnings, ", "))})
		d.warnings = nil
		return d, nil
	}
	d.defaulted = p.defaultTracked(u.Object, gvk.Version)
	d.obj = u
	return d, nil
}

func (p *Previewer) namespaceFor(u *unstructured.Unstructured, opts PreviewOptions) string {
	if p.crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		return ""
	}
	if ns := u.GetNamespace(); ns != "" {
		return ns
	}
	if opts.Namespace != "" {
		return opts.Namespace
	}
	return metav1.NamespaceDefault
}

// Create previews a create request of the object data (JSON) in its own apiVersion.
func (p *Previewer) Create(ctx context.Context, data []byte, opts PreviewOptions) (*PreviewResult, error) {
	return p.run(ctx, data, nil, opts)
}

// Update previews an update request that replaces old (JSON, as read from the cluster) with
// data. When data has no metadata.resourceVersion, old's is used (the API server demands one).
func (p *Previewer) Update(ctx context.Context, data, old []byte, opts PreviewOptions) (*PreviewResult, error) {
	if old == nil {
		return nil, errors.New("update needs the old object")
	}
	return p.run(ctx, data, old, opts)
}

func (p *Previewer) run(ctx context.Context, data, oldData []byte, opts PreviewOptions) (*PreviewResult, error) {
	fv := opts.FieldValidation
	if fv == "" {
		fv = FieldValidationWarn
	}
	if err := p.inUse(); err != nil {
		return nil, err
	}
	gvk, err := head(data)
	if err != nil {
		return nil, &InputError{Err: err}
	}
	d, err := p.decode(data, gvk, fv)
	if err != nil {
		return nil, err
	}
	r := &PreviewResult{
		Operation: "create", APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
		Version: gvk.Version, ReadVersion: gvk.Version, StorageVersion: p.storage,
		Pruned: nonNil(d.pruned), PrunedOnConversion: []string{}, DefaultedOnRead: []string{}, DroppedNulls: nonNil(d.droppedNulls), Defaulted: nonNil(d.defaulted),
		Warnings: append(p.deprecationWarning(gvk.Version), d.warnings...), Errors: []PreviewError{}, Notes: []string{},
	}
	if oldData != nil {
		r.Operation = "update"
	}
	if opts.ReadVersion != "" && opts.ReadVersion != gvk.Version {
		if _, err := p.usable(opts.ReadVersion); err != nil {
			return nil, err
		}
		if v, _ := crdinfo.Lookup(p.crd, opts.ReadVersion); !v.Served {
			return nil, inputErrorf("%s: version %q is not served: it cannot be read (served: %s)", p.crd.Name, opts.ReadVersion, strings.Join(p.served(), ", "))
		}
		if p.webhook {
			r.Notes = append(r.Notes, fmt.Sprintf("conversion strategy is Webhook: showing the object in %s, its own version; converting it to %s needs the webhook (kubectl crdver convert)", gvk.Version, opts.ReadVersion))
		} else {
			r.ReadVersion = opts.ReadVersion
		}
	}
	if d.obj != nil {
		r.Name, r.Namespace = d.obj.GetName(), p.namespaceFor(d.obj, opts)
	} else if u := (&unstructured.Unstructured{}); u.UnmarshalJSON(data) == nil {
		r.Name, r.Namespace = u.GetName(), p.namespaceFor(u, opts)
	}
	if len(d.errs) > 0 {
		r.Verdict, r.Errors = Rejected, d.errs
		return r, nil
	}
	u := d.obj
	ns := p.namespaceFor(u, opts)
	st, err := p.strategyFor(gvk.Version)
	if err != nil {
		return nil, err
	}
	rec := &warningRecorder{}
	ctx = warning.WithWarningRecorder(genericapirequest.WithNamespace(ctx, ns), rec)

	objectMeta, err := meta.Accessor(u)
	if err != nil {
		return nil, err
	}
	// handlers/create.go and update.go
	rest.WipeObjectMetaSystemFields(objectMeta)
	if err := rest.EnsureObjectNamespaceMatchesRequestNamespace(ns, objectMeta); err != nil {
		return p.reject(r, rec, err), nil
	}
	dedupOwnerReferences(ctx, objectMeta)
	if oldData == nil {
		if objectMeta.GetResourceVersion() != "" {
			// etcd3's store refuses it; a server-side dry-run does not look.
			r.Notes = append(r.Notes, "metadata.resourceVersion is set: a real create fails with \"resourceVersion should not be set on objects to be created\" (a server-side dry-run does not check it); remove it, or preview it as an update of the stored object")
		}
		// registry.Store.create
		rest.FillObjectMetaSystemFields(objectMeta)
		if objectMeta.GetGenerateName() != "" && objectMeta.GetName() == "" {
			objectMeta.SetName(st.GenerateName(objectMeta.GetGenerateName()))
		}
		if err := rest.BeforeCreate(st, ctx, u); err != nil {
			return p.reject(r, rec, err), nil
		}
	} else {
		old, err := p.readOld(oldData, data, gvk, ns)
		if err != nil {
			return nil, err
		}
		if objectMeta.GetResourceVersion() == "" {
			objectMeta.SetResourceVersion(old.GetResourceVersion())
		}
		if objectMeta.GetName() != old.GetName() {
			return nil, inputErrorf("the old object is %q but the new one is %q: an update keeps the name", old.GetName(), objectMeta.GetName())
		}
		if err := rest.BeforeUpdate(st, ctx, u, old); err != nil {
			return p.reject(r, rec, err), nil
		}
	}
	r.Warnings = append(r.Warnings, rec.warnings...)
	r.Name, r.Namespace = u.GetName(), u.GetNamespace()

	// The storage round trip (DryRunnableStorage.copyInto, or a real write and read).
	p.lastReadDefaults = nil
	out, notes, converted, err := p.storageRoundTrip(u, r.ReadVersion)
	if err != nil {
		return nil, err
	}
	r.Notes = append(r.Notes, notes...)
	r.PrunedOnConversion = nonNil(converted)
	r.DefaultedOnRead = nonNil(p.lastReadDefaults)
	unstructured.RemoveNestedField(out.Object, "metadata", "uid")
	unstructured.RemoveNestedField(out.Object, "metadata", "creationTimestamp")
	if oldData == nil {
		unstructured.RemoveNestedField(out.Object, "metadata", "resourceVersion")
	}
	r.Object = out.Object
	r.Verdict = Accepted
	return r, nil
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// reject records the API server's error (a 422 Invalid with causes, or another status).
func (p *Previewer) reject(r *PreviewResult, rec *warningRecorder, err error) *PreviewResult {
	r.Verdict = Rejected
	r.Warnings = append(r.Warnings, rec.warnings...)
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Details != nil && len(se.Status().Details.Causes) > 0 {
		for _, c := range se.Status().Details.Causes {
			r.Errors = append(r.Errors, PreviewError{Field: c.Field, Type: string(c.Type), Message: c.Message})
		}
		// The validators' order depends on map iteration: sort by field (errors without a
		// field, such as "some validation rules were not checked", last).
		sort.SliceStable(r.Errors, func(i, j int) bool {
			a, b := r.Errors[i], r.Errors[j]
			if (a.Field == "<nil>") != (b.Field == "<nil>") {
				return b.Field == "<nil>"
			}
			if a.Field != b.Field {
				return a.Field < b.Field
			}
			return a.Message < b.Message
		})
		p.noteDifferences(r)
		return r
	}
	reason := "Invalid"
	if errors.As(err, &se) {
		reason = string(se.Status().Reason)
	}
	r.Errors = append(r.Errors, PreviewError{Type: reason, Message: err.Error()})
	p.noteDifferences(r)
	return r
}

// noteDifferences adds the note of every known difference between Kubernetes versions that
// the rejection depends on (kubeversion.Differences: what no version switch covers).
func (p *Previewer) noteDifferences(r *PreviewResult) {
	msgs := make([]string, 0, len(r.Errors))
	for _, e := range r.Errors {
		msgs = append(msgs, e.Message)
	}
	r.Notes = append(r.Notes, kubeversion.NotesFor(p.KubeVersion(), kubeversion.CheckObjectValidation, msgs)...)
}

// deprecationWarning is the warning the API server sends with every request to a deprecated
// version (customresource_handler.go: the version's deprecationWarning, or its default text).
func (p *Previewer) deprecationWarning(v string) []string {
	ver, err := crdinfo.Lookup(p.crd, v)
	if err != nil || !ver.Deprecated {
		return []string{}
	}
	if ver.DeprecationWarning != nil {
		return []string{*ver.DeprecationWarning}
	}
	msg := fmt.Sprintf("%s/%s %s is deprecated", p.crd.Spec.Group, v, p.crd.Spec.Names.Kind)
	var newer []string
	for _, other := range p.crd.Spec.Versions {
		if other.Served && !other.Deprecated && version.CompareKubeAwareVersionStrings(v, other.Name) < 0 {
			newer = append(newer, other.Name)
		}
	}
	if len(newer) > 0 {
		crdinfo.SortByPriority(newer)
		msg += fmt.Sprintf("; use %s/%s %s", p.crd.Spec.Group, newer[0], p.crd.Spec.Names.Kind)
	}
	return []string{msg}
}

// dedupOwnerReferences is the create and update handlers' dedupOwnerReferencesAndAddWarning:
// duplicate owner references are dropped with a warning.
func dedupOwnerReferences(ctx context.Context, objectMeta metav1.Object) {
	refs := objectMeta.GetOwnerReferences()
	var result []metav1.OwnerReference
	var duplicates []string
	seen := map[types.UID]bool{}
	for _, ref := range refs {
		dup := false
		if seen[ref.UID] {
			for _, r := range result {
				if apiequality.Semantic.DeepEqual(r, ref) {
					dup = true
					break
				}
			}
		}
		if dup {
			duplicates = append(duplicates, string(ref.UID))
			continue
		}
		seen[ref.UID] = true
		result = append(result, ref)
	}
	if len(duplicates) > 0 {
		warning.AddWarning(ctx, "", fmt.Sprintf(handlers.DuplicateOwnerReferencesWarningFormat, strings.Join(duplicates, ", ")))
		objectMeta.SetOwnerReferences(result)
	}
}
