package plan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/crdschema"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/preview"
)

// Options tune a plan.
type Options struct {
	// FieldValidation of the re-create ("" is Strict: kubectl create's default).
	FieldValidation preview.FieldValidation
	// Sample caps the number of objects evaluated (0: all).
	Sample int64
	// Workers evaluating objects (0: one per core).
	Workers int
	// Progress, when set, counts evaluated objects (for a progress display).
	Progress *atomic.Int64
	// Conversion says how the conversion the new CRD relies on is judged (conversion.go).
	Conversion ConversionOptions
	// ApplyFile names the new CRDs in the runbook's commands ("" is NEW-CRDS.yaml).
	ApplyFile string
	// KubeVersion is the Kubernetes version the API server's code runs as: the process must
	// run as it (kubeversion.Use, chosen once per run by the caller; Plan refuses another with
	// a *kubeversion.NotInUseError). Zero: the version the process runs as.
	KubeVersion kubeversion.Version
	// Memo, when set, carries what an earlier plan in this process found clean to a later one
	// (ObjectMemo: upgrade's verify does not evaluate again an object its first plan found
	// clean and that has not changed since).
	Memo *ObjectMemo
	// Each, when set, is called with every object the plan lists, in list order, from one
	// goroutine, after it is evaluated (a caller's own look at the objects without a read of
	// its own).
	Each func(u *unstructured.Unstructured)
	// MaxFindings bounds the findings the item lists (0: DefaultMaxFindings); every finding is
	// counted (Objects.Omitted, the verdict's reasons, the runbook's counts): memory does not
	// grow with the objects.
	MaxFindings int
	// DryRun, when set, is a client of the cluster the live CRD comes from, allowed to create
	// and update CRDs: the apply verdict is then the API server's answer to a server-side
	// dry-run (Item.ApplyVerdictSource), exact for that server.
	DryRun apiextensionsclient.Interface
}

// Plan predicts what applying next does, given the live CRD (nil when the cluster does not
// have it: a create) and its objects (nil: not evaluated). It fails only when it cannot
// complete (the context is cancelled, listing fails, a schema cannot be used); everything it
// finds is in the Item.
func Plan(ctx context.Context, live, next *apiextensionsv1.CustomResourceDefinition, src ObjectSource, opts Options) (*Item, error) {
	it := &Item{
		CRD: next.Name, Operation: OperationUpdate,
		StorageVersion: StorageChange{After: crdinfo.StorageVersion(next)},
		Versions:       VersionChanges{Added: []string{}, Removed: []string{}, Unserved: []string{}, Deprecated: []string{}},
		SchemaChanges:  []SchemaChange{}, Conversion: []string{},
		Objects:       Objects{Findings: []Finding{}},
		ManagedFields: []ManagedFieldsVersion{}, Steps: []string{}, Notes: []string{},
		Verdict: VerdictSafe, BreakingReasons: []string{}, UnknownReasons: []string{}, InvalidOnRecreateReasons: []string{}, Kinds: []Kind{}, Stricter: []SchemaChange{},
	}
	if live == nil {
		it.Operation = OperationCreate
	} else {
		live = live.DeepCopy()
		it.StorageVersion.Before = crdinfo.StorageVersion(live)
		if len(live.Status.StoredVersions) == 0 && it.StorageVersion.Before != "" {
			it.storedVersionsUnknown = true
			live.Status.StoredVersions = []string{it.StorageVersion.Before}
			it.Notes = append(it.Notes, fmt.Sprintf("the live CRD has no status.storedVersions (a file?): taken as [%s]; a cluster may list more", it.StorageVersion.Before))
		}
	}
	if _, err := kubeversion.Require(opts.KubeVersion); err != nil {
		return nil, err
	}
	apply, stored, source, notes, err := checkApplyFor(ctx, live, next, opts)
	if err != nil {
		return nil, err
	}
	it.Apply, it.ApplyVerdictSource = apply, source
	it.Notes = append(it.Notes, notes...)
	it.StoredVersionsAfterApply = stored
	if it.StoredVersionsAfterApply == nil {
		it.StoredVersionsAfterApply = []string{}
	}
	for _, v := range stored {
		if v != it.StorageVersion.After {
			it.MigrationPending = true
		}
	}

	if live != nil {
		versionChanges(live, next, &it.Versions)
		it.Conversion = conversionChanges(live, next)
		changes, notes, err := schemaChanges(live, next)
		if err != nil {
			return nil, err
		}
		sort.SliceStable(changes, func(i, j int) bool {
			if changes[i].Version != changes[j].Version {
				return changes[i].Version < changes[j].Version
			}
			if changes[i].From != changes[j].From {
				return changes[i].From < changes[j].From
			}
			return changes[i].Path < changes[j].Path
		})
		it.SchemaChanges = changes
		it.Notes = append(it.Notes, notes...)
	}

	if err := evaluateObjects(ctx, live, next, src, opts, it); err != nil {
		judge(live, it)
		it.UnknownReasons = append(it.UnknownReasons, "the plan did not complete: "+err.Error())
		it.addKind(KindUnknown)
		it.Verdict = Worse(it.Verdict, VerdictUnknown)
		it.Breaking = true
		return it, err
	}
	cc, err := judgeConversion(ctx, live, next, opts.Conversion, it.Objects.Total)
	it.ConversionCheck = cc
	settleWebhookNotes(it)
	if err != nil {
		judge(live, it)
		if ctx.Err() != nil {
			err = fmt.Errorf("%s: %w: %w", next.Name, ErrInterrupted, ctx.Err())
		}
		return it, err
	}
	if it.MigrationPending {
		it.MigrationObjects = it.Objects.Total
		if it.MigrationObjects < 0 {
			it.MigrationObjects = it.Objects.Evaluated
		}
	}
	judge(live, it)
	it.live, it.next = live, next
	it.Steps = itemSteps(Runbook([]Item{*it}, RunbookOptions{ApplyFile: opts.ApplyFile}))
	return it, nil
}

func evaluateObjects(ctx context.Context, live, next *apiextensionsv1.CustomResourceDefinition, src ObjectSource, opts Options, it *Item) error {
	if live == nil {
		it.Objects.Notes = append(it.Objects.Notes, "the CRD is new to the cluster: it has no objects yet")
		return nil
	}
	if src == nil {
		it.Objects.Total = -1
		it.Objects.Notes = append(it.Objects.Notes, "objects not evaluated: none were given")
		return nil
	}
	e := &evaluator{next: next, fv: opts.FieldValidation,
		viaWebhook: strategyOf(live) == apiextensionsv1.WebhookConverter}
	if e.fv == "" {
		e.fv = preview.FieldValidationStrict
	}
	// Where an object can be encoded in etcd: the live storage version, then the other
	// storedVersions (a pending migration).
	candidates := []string{crdinfo.StorageVersion(live)}
	for _, v := range live.Status.StoredVersions {
		if !slices.Contains(candidates, v) {
			candidates = append(candidates, v)
		}
	}
	for _, v := range candidates {
		if _, err := crdinfo.Lookup(next, v); err != nil {
			it.Objects.Notes = append(it.Objects.Notes, fmt.Sprintf("objects encoded at %s in etcd cannot be read under the new CRD, which removes %s", v, v))
			continue
		}
		e.encodings = append(e.encodings, v)
	}
	if len(e.encodings) == 0 {
		// The apply is rejected until a migration rewrites every object at the new storage
		// version (the runbook's first step): evaluate them as they will be encoded then.
		// When the live CRD lacks that version, the runbook first applies an intermediate CRD
		// (Intermediate) holding it: the rewrite stores the same content either way.
		if after := crdinfo.StorageVersion(next); after != "" {
			e.encodings, e.rewriteFirst = []string{after}, true
			// The intermediate converts as the new CRD does: through its webhook, the
			// rewrite stores what the webhook makes of each object, not the object relabelled.
			e.viaWebhook = e.viaWebhook || strategyOf(next) == apiextensionsv1.WebhookConverter
			it.Objects.Notes = append(it.Objects.Notes, fmt.Sprintf("evaluated as encoded at %s, after the migration the runbook starts with", after))
		}
	}
	// The live schemas of the other encodings (notEncodedAt): with conversion None and
	// pruning on, a read prunes with them.
	if len(e.encodings) > 1 && !e.viaWebhook && !live.Spec.PreserveUnknownFields {
		for _, v := range e.encodings[1:] {
			if vs, err := crdschema.SchemaFor(live, v); err == nil && vs.Structural != nil && len(vs.Violations) == 0 {
				if e.liveSchemas == nil {
					e.liveSchemas = map[string]*structuralschema.Structural{}
				}
				e.liveSchemas[v] = vs.Structural
			}
		}
	}
	e.readVersion = readVersionOf(next)
	e.recreateAsRead = judgedApart(next, e.readVersion)
	it.Objects.ReadVersion = e.readVersion
	it.Objects.Total = src.Total()
	switch {
	case e.readVersion == "":
		it.Objects.Notes = append(it.Objects.Notes, "objects not evaluated: the new CRD serves no version")
		return nil
	case len(e.encodings) == 0:
		it.Objects.Notes = append(it.Objects.Notes, "objects not evaluated: the new CRD has none of the versions they are stored at")
		return nil
	}
	if tc, err := preflight.NewTypeChecker(next); err == nil {
		e.types = tc
	} else {
		it.Objects.Notes = append(it.Objects.Notes, fmt.Sprintf("whether the objects fit the typed schema server-side apply uses was not evaluated: %v", err))
	}
	if e.readVersion == it.StorageVersion.After {
		var note string
		if e.owners, note = newOwnersAtRewrite(live, next, e.readVersion, e.encodings, opts.KubeVersion); note != "" {
			it.Objects.Notes = append(it.Objects.Notes, note)
		}
	}
	if v, _ := crdinfo.Lookup(next, e.readVersion); v != nil && v.Deprecated {
		e.readDeprecated = true
	}
	for _, v := range append([]string{e.readVersion}, e.encodings...) {
		vs, err := crdschema.SchemaFor(next, v)
		if err != nil {
			return err
		}
		if vs.Internal == nil || len(vs.Violations) > 0 {
			it.Objects.Notes = append(it.Objects.Notes, fmt.Sprintf("objects not evaluated: the new version %s has no structural schema (kubectl crdver explain says why)", v))
			return nil
		}
	}
	if len(e.encodings) > 1 {
		it.Objects.Notes = append(it.Objects.Notes, fmt.Sprintf("a migration is pending (status.storedVersions: %s): objects are evaluated as encoded at %s; where another encoding changes the answer, the object says so",
			strings.Join(live.Status.StoredVersions, ", "), e.encodings[0]))
	}
	eo := evalOptions{sample: opts.Sample, workers: opts.Workers, progress: opts.Progress, maxFindings: opts.MaxFindings, each: opts.Each}
	if opts.Sample == 0 {
		eo.reuse, eo.record = opts.Memo.start(next.Name, e)
		if opts.Memo != nil {
			eo.reused = &opts.Memo.Reused
		}
	}
	out, err := e.evaluateAll(ctx, src, eo)
	if eo.reuse != nil {
		eo.reuse.close()
	}
	if eo.record != nil {
		eo.record.close(err == nil)
	}
	if out != nil {
		it.Objects.Evaluated = out.evaluated
		it.Objects.Findings, it.Objects.Omitted, it.objects = out.findings, out.omitted, &out.tally
		census := out.managers.Census()
		it.ManagedFields = managedFieldsVersions(census, next, e.readVersion)
		if err == nil && opts.Sample == 0 {
			it.census = census
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: %w after %s", next.Name, ErrInterrupted, objectsCount(int(it.Objects.Evaluated)))
		}
		return fmt.Errorf("%s: evaluating the objects: %w", next.Name, err)
	}
	if it.Objects.Total < 0 && (opts.Sample == 0 || it.Objects.Evaluated < opts.Sample) {
		it.Objects.Total = it.Objects.Evaluated
	}
	if it.Objects.Total < 0 && opts.Sample > 0 && it.Objects.Evaluated >= opts.Sample {
		it.Objects.Notes = append(it.Objects.Notes, fmt.Sprintf("sampled: %s evaluated; the total is not known", objectsCount(int(it.Objects.Evaluated))))
	}
	if it.Objects.Evaluated < it.Objects.Total {
		it.Objects.Notes = append(it.Objects.Notes, fmt.Sprintf("sampled: %d of %s evaluated", it.Objects.Evaluated, objectsCount(int(it.Objects.Total))))
	}
	it.allEvaluated = it.Objects.Total >= 0 && it.Objects.Evaluated >= it.Objects.Total
	return nil
}

func sortedVersions[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	crdinfo.SortByPriority(out)
	return out
}

// readVersionOf is the version reads are evaluated in: the storage version when served
// (what migrate writes and controllers of the newest API use), else the preferred version.
func readVersionOf(crd *apiextensionsv1.CustomResourceDefinition) string {
	if v, err := crdinfo.Lookup(crd, crdinfo.StorageVersion(crd)); err == nil && v.Served {
		return v.Name
	}
	for _, n := range crdinfo.VersionNames(crd) {
		if v, _ := crdinfo.Lookup(crd, n); v.Served {
			return n
		}
	}
	return ""
}

// ListVersion is the version to list a live CRD's objects at: the storage version when served
// (objects are encoded at it unless a migration is pending), else the preferred version.
func ListVersion(live *apiextensionsv1.CustomResourceDefinition) string { return readVersionOf(live) }

func versionChanges(live, next *apiextensionsv1.CustomResourceDefinition, out *VersionChanges) {
	for _, n := range crdinfo.VersionNames(next) {
		nv, _ := crdinfo.Lookup(next, n)
		lv, err := crdinfo.Lookup(live, n)
		switch {
		case err != nil:
			out.Added = append(out.Added, n)
		default:
			if lv.Served && !nv.Served {
				out.Unserved = append(out.Unserved, n)
			}
			if nv.Deprecated && !lv.Deprecated {
				out.Deprecated = append(out.Deprecated, n)
			}
		}
	}
	for _, n := range crdinfo.VersionNames(live) {
		if _, err := crdinfo.Lookup(next, n); err != nil {
			out.Removed = append(out.Removed, n)
		}
	}
}

func strategyOf(crd *apiextensionsv1.CustomResourceDefinition) apiextensionsv1.ConversionStrategyType {
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy == "" {
		return apiextensionsv1.NoneConverter
	}
	return crd.Spec.Conversion.Strategy
}

func conversionChanges(live, next *apiextensionsv1.CustomResourceDefinition) []string {
	out := []string{}
	a, b := strategyOf(live), strategyOf(next)
	if a != b {
		out = append(out, fmt.Sprintf("strategy %s → %s", a, b))
	}
	if b != apiextensionsv1.WebhookConverter || a != apiextensionsv1.WebhookConverter {
		return out
	}
	wa, wb := live.Spec.Conversion.Webhook, next.Spec.Conversion.Webhook
	if wa == nil || wb == nil {
		return out
	}
	ca, cb := wa.ClientConfig, wb.ClientConfig
	if ca != nil && cb != nil {
		if !equality.Semantic.DeepEqual(ca.URL, cb.URL) || !equality.Semantic.DeepEqual(ca.Service, cb.Service) {
			out = append(out, fmt.Sprintf("webhook endpoint %s → %s", endpoint(ca), endpoint(cb)))
		}
		if string(ca.CABundle) != string(cb.CABundle) {
			out = append(out, "webhook caBundle changed")
		}
	}
	if strings.Join(wa.ConversionReviewVersions, ",") != strings.Join(wb.ConversionReviewVersions, ",") {
		out = append(out, fmt.Sprintf("conversionReviewVersions [%s] → [%s]", strings.Join(wa.ConversionReviewVersions, ", "), strings.Join(wb.ConversionReviewVersions, ", ")))
	}
	return out
}

func endpoint(c *apiextensionsv1.WebhookClientConfig) string {
	switch {
	case c.URL != nil:
		return *c.URL
	case c.Service != nil:
		port := int32(443)
		if c.Service.Port != nil {
			port = *c.Service.Port
		}
		path := ""
		if c.Service.Path != nil {
			path = *c.Service.Path
		}
		return fmt.Sprintf("service %s/%s:%d%s", c.Service.Namespace, c.Service.Name, port, path)
	}
	return "none"
}
