package upgrade

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/atomicfile"
	"github.com/crdver/kubectl-crdver/internal/pager"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/ownership"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/restore"
)

func stepKey(s plan.RunbookStep) string {
	return s.Action + "|" + strings.Join(s.CRDs, ",") + "|" + s.Version + "|" + s.Target
}

// The backup's first line says which cluster and release it belongs to (restore.BackupHeader);
// its last line that it is whole (restore.BackupTrailer). Both are YAML comments: restore and
// kubectl read the file as plain documents.
func (r *runner) backupHeader() string {
	return restore.BackupHeader(r.cp.Cluster, r.c.Server, r.cp.Release)
}

// backup writes every object of each resource (plural.version.group: each version that holds
// data) to the backup file, one YAML document per object, a page in memory at a time. The
// file appears whole or not at all (written beside, synced, renamed); its digest is kept in
// the checkpoint, so that a resumed run reuses it only when it is still the same file.
func (r *runner) backup(ctx context.Context, s *StepResult) error {
	if h := r.o.Hop; h != nil && h.BackupTaken {
		s.State, s.Detail = StateAlready, "the path's backup, taken before its first write, in "+r.o.BackupFile
		return nil
	}
	if b := r.cp.Backup; b != nil {
		err := checkBackup(b)
		if err == nil {
			r.rep.Backup = b
			r.rep.Backup.Reused = true
			s.State, s.Detail = StateAlready, fmt.Sprintf("taken by the first run, kept in %s", b.File)
			return nil
		}
		if r.dropStarted() && r.o.BackupFile == b.File {
			return fmt.Errorf("%w: the backup the first run took cannot be used (%v), and its later steps have begun, so objects may already have lost the consented fields it held: put the file back to continue, or run again naming a new backup file, to back up what the cluster still holds and continue without the first backup",
				ErrBackupLost, err)
		}
		r.notify("the first run's backup cannot be used (%v): taking a new one", err)
		r.rep.Warnings = append(r.rep.Warnings, fmt.Sprintf("the first run's backup %s could not be used (%v); a new one was taken in %s", b.File, err, r.o.BackupFile))
		r.cp.Backup = nil
	}
	file := r.o.BackupFile
	if _, err := os.Stat(file); err == nil {
		// A run killed between writing the backup and recording it left it: this cluster's,
		// this release's and whole, and nothing was written since, so it is the first backup.
		if b, err := r.adoptBackup(file, s.Resources); err == nil {
			r.rep.Backup, r.cp.Backup = b, b
			s.State, s.Detail = StateAlready, fmt.Sprintf("taken by an earlier run that stopped before recording it, kept in %s", file)
			return nil
		} else if !errors.Is(err, errNotOurs) {
			return fmt.Errorf("the backup file %s exists (%v): name another one (nothing was written to the cluster)", file, err)
		}
		return fmt.Errorf("the backup file %s exists: name another one (nothing was written to the cluster)", file)
	}
	// A backup being written when a run was killed: this run holds the lease, nobody else
	// writes it.
	_ = atomicfile.Clean(file)
	f, err := atomicfile.Create(file, 0o600)
	if err != nil {
		return fmt.Errorf("creating the backup file: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	w := bufio.NewWriter(io.MultiWriter(f, h))
	b := &Backup{File: file, Cluster: r.cp.Cluster, Release: r.cp.Release, Resources: []BackupResource{}}
	fmt.Fprint(w, r.backupHeader())
	var n atomic.Int64 // objects written, for OnBackup's progress too
	if r.o.OnBackup != nil {
		defer r.o.OnBackup(n.Load)()
	}
	for _, res := range s.Resources {
		gvr, ok := parseResource(res)
		if !ok {
			return fmt.Errorf("backup: %q is not plural.version.group", res)
		}
		k, err := r.backupResource(ctx, w, gvr, &n)
		if err != nil {
			return fmt.Errorf("backing up %s: %w", res, err)
		}
		b.Resources = append(b.Resources, BackupResource{Resource: res, Objects: k})
	}
	fmt.Fprint(w, restore.BackupTrailer(n.Load()))
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Commit(); err != nil {
		return err
	}
	b.Digest = hex.EncodeToString(h.Sum(nil))
	r.rep.Backup, r.cp.Backup = b, b
	s.Detail = fmt.Sprintf("%d objects at %d versions to %s", n.Load(), len(b.Resources), file)
	return nil
}

// ErrBackupLost: a resumed run's backup is gone or changed after objects may have lost what
// it held.
var ErrBackupLost = errors.New("the backup is lost")

var errNotOurs = errors.New("not a backup of this cluster and release")

// checkBackup: b's file is still there, readable and the same bytes (its digest).
func checkBackup(b *Backup) error {
	if b.Digest == "" {
		return fmt.Errorf("%s: no digest was recorded for it", b.File)
	}
	d, err := fileDigest(b.File)
	if err != nil {
		return err
	}
	if d != b.Digest {
		return fmt.Errorf("%s changed since it was taken (sha256 %s, now %s)", b.File, b.Digest[:12], d[:12])
	}
	return nil
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// adoptBackup takes file as this run's backup when its header names this cluster and release,
// it ends with the trailer, and no step that drops data has begun; errNotOurs when it is not
// a backup of this cluster and release.
func (r *runner) adoptBackup(file string, resources []string) (*Backup, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	first, last := "", ""
	counts := map[string]int64{}
	res := ""
	for sc.Scan() {
		l := sc.Text()
		if first == "" {
			first = l + "\n"
		}
		if strings.HasPrefix(l, "# ") && !restore.IsBackupTrailer(l) && first != l+"\n" {
			res = strings.TrimPrefix(l, "# ")
		}
		if l == "---" {
			counts[res]++
		}
		if l != "" {
			last = l
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if r.cp.Cluster == "" || first != r.backupHeader() {
		return nil, errNotOurs
	}
	if !restore.IsBackupTrailer(last) {
		return nil, fmt.Errorf("%s is not whole (no closing line)", file)
	}
	if r.dropStarted() {
		return nil, errNotOurs
	}
	d, err := fileDigest(file)
	if err != nil {
		return nil, err
	}
	b := &Backup{File: file, Cluster: r.cp.Cluster, Release: r.cp.Release, Digest: d, Resources: []BackupResource{}, Reused: true}
	for _, x := range resources {
		b.Resources = append(b.Resources, BackupResource{Resource: x, Objects: counts[x]})
	}
	return b, nil
}

// dropStarted: a step after the backup that may drop what it holds has begun (or is done).
func (r *runner) dropStarted() bool {
	after := false
	for _, s := range r.rep.Steps {
		k := stepKey(s.RunbookStep)
		if s.Action == plan.ActionBackup {
			after = true
			continue
		}
		if after && dropsData(s.Action) && (r.cp.Started == k || slices.Contains(r.cp.Done, k)) {
			return true
		}
	}
	return false
}

// dropsData: the step's writes may lose what the backup holds (re-encoding objects, removing
// versions, applying the release).
func dropsData(action string) bool {
	switch action {
	case plan.ActionIntermediate, plan.ActionMigrate, plan.ActionRetire, plan.ActionApply:
		return true
	}
	return false
}

// backupResource writes every object of gvr to w and returns how many, each counted in done as
// it is written.
func (r *runner) backupResource(ctx context.Context, w *bufio.Writer, gvr schema.GroupVersionResource, done *atomic.Int64) (int64, error) {
	var n int64
	fmt.Fprintf(w, "# %s.%s.%s\n", gvr.Resource, gvr.Version, gvr.Group)
	err := pager.Each(ctx, pager.Dynamic(r.c.Dynamic.Resource(gvr), pager.Options{Limit: r.o.ChunkSize}), func(list *unstructured.UnstructuredList) error {
		for i := range list.Items {
			y, err := yaml.Marshal(list.Items[i].Object)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "---\n%s", y)
			n++
			done.Add(1)
		}
		return nil
	})
	return n, err
}

func parseResource(s string) (schema.GroupVersionResource, bool) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) != 3 {
		return schema.GroupVersionResource{}, false
	}
	return schema.GroupVersionResource{Resource: parts[0], Version: parts[1], Group: parts[2]}, true
}

// applyCRD server-side applies crd (spec, labels, annotations) with the run's field manager,
// forcing conflicts: our own storage switches own parts of .spec.versions. cur is the live CRD
// when the caller has just read it (nil: it is read here if needed).
func (r *runner) applyCRD(ctx context.Context, crd, cur *apiextensionsv1.CustomResourceDefinition) error {
	if err := r.dropWebhookConversion(ctx, crd, cur); err != nil {
		return err
	}
	body, err := ApplyBody(crd)
	if err != nil {
		return err
	}
	force := true
	_, err = r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: r.o.FieldManager, Force: &force})
	if err != nil {
		return fmt.Errorf("applying %s: %w", crd.Name, err)
	}
	return nil
}

// ApplyBody is crd as a server-side apply (or kubectl apply) would send it: apiVersion, kind,
// name, labels, annotations and spec; no status and no server-set metadata.
func ApplyBody(crd *apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	spec, err := json.Marshal(crd.Spec)
	if err != nil {
		return nil, err
	}
	md := map[string]any{"name": crd.Name}
	if len(crd.Labels) > 0 {
		md["labels"] = crd.Labels
	}
	if len(crd.Annotations) > 0 {
		md["annotations"] = crd.Annotations
	}
	return json.Marshal(map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": md, "spec": json.RawMessage(spec)})
}

// intermediate applies, for each CRD of the step, the new CRD with the removed versions kept,
// then waits until the API server encodes writes at the new storage version.
func (r *runner) intermediate(ctx context.Context, s *StepResult) error {
	var applied []string
	for _, n := range s.CRDs {
		it := r.item(n)
		_, next := it.CRDs()
		cur, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting %s: %w", n, err)
		}
		inter := plan.IntermediateFor(it)
		if inter == nil {
			inter = next
		}
		if intermediateApplied(cur, inter) {
			continue // applied by an earlier run
		}
		if err := r.applyCRD(ctx, inter, cur); err != nil {
			return err
		}
		crd, err := r.waitCRD(ctx, n, func(c *apiextensionsv1.CustomResourceDefinition) bool {
			return established(c) && crdinfo.StorageVersion(c) == crdinfo.StorageVersion(next)
		})
		if err != nil {
			return err
		}
		if err := migrate.WaitStorageVersion(ctx, r.c, crd, 30e9); err != nil {
			return err
		}
		applied = append(applied, n)
		r.notify("%s: intermediate CRD applied (storage version %s)", n, crdinfo.StorageVersion(next))
	}
	if len(applied) == 0 {
		s.State, s.Detail = StateAlready, "every CRD already has its new storage version"
		return nil
	}
	s.Detail = "applied as field manager " + r.o.FieldManager + ": " + strings.Join(applied, ", ")
	return nil
}

// intermediateApplied: cur has inter's storage version as storage and serves every version
// inter serves.
func intermediateApplied(cur, inter *apiextensionsv1.CustomResourceDefinition) bool {
	if crdinfo.StorageVersion(cur) != crdinfo.StorageVersion(inter) {
		return false
	}
	for _, v := range crdinfo.ServedVersions(inter) {
		if cv, err := crdinfo.Lookup(cur, v); err != nil || !cv.Served {
			return false
		}
	}
	return true
}

// dropWebhookConversion: when crd converts without a webhook but the live CRD's conversion
// names one, the webhook settings go first, as a merge patch. A server-side apply does not
// remove fields another field manager owns (Helm's, a client-side kubectl apply's), and
// strategy None beside a webhook's clientConfig is invalid, so the apply would be refused
// (found with a chart installed by the real helm: e2e/helm_test.go). Nothing converts through
// the webhook once crd is applied either. live is the live CRD, or nil to read it here.
func (r *runner) dropWebhookConversion(ctx context.Context, crd, live *apiextensionsv1.CustomResourceDefinition) error {
	if c := crd.Spec.Conversion; c != nil && c.Strategy == apiextensionsv1.WebhookConverter {
		return nil
	}
	if live == nil {
		var err error
		live, err = r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("getting %s: %w", crd.Name, err)
		}
	}
	if live.Spec.Conversion == nil || live.Spec.Conversion.Webhook == nil {
		return nil
	}
	patch := []byte(`{"spec":{"conversion":{"strategy":"None","webhook":null}}}`)
	if _, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: r.o.FieldManager}); err != nil {
		return fmt.Errorf("removing the conversion webhook of %s, which the new CRD does not have: %w", crd.Name, err)
	}
	r.notify("%s: conversion webhook removed (the new CRD converts with None)", crd.Name)
	return nil
}

// apply server-side applies every CRD of the release and waits until each is established
// with its new versions.
func (r *runner) apply(ctx context.Context, s *StepResult) error {
	for i := range r.items {
		_, next := r.items[i].CRDs()
		if err := r.applyCRD(ctx, next, nil); err != nil {
			return err
		}
	}
	for i := range r.items {
		_, next := r.items[i].CRDs()
		if err := r.dropLeftovers(ctx, next); err != nil {
			return err
		}
		want := crdinfo.VersionNames(next)
		if _, err := r.waitCRD(ctx, next.Name, func(c *apiextensionsv1.CustomResourceDefinition) bool {
			return established(c) && slices.Equal(crdinfo.VersionNames(c), want)
		}); err != nil {
			return err
		}
	}
	s.Detail = fmt.Sprintf("%d CRDs applied (server-side, field manager %s, conflicts forced)", len(r.items), r.o.FieldManager)
	r.notify("release applied: %d CRDs", len(r.items))
	return nil
}

// dropLeftovers removes versions the release does not have that survived the apply: a
// server-side apply does not delete list entries another field manager owns. Only versions
// no longer in status.storedVersions are removed (the API server refuses the others anyway).
func (r *runner) dropLeftovers(ctx context.Context, next *apiextensionsv1.CustomResourceDefinition) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, next.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		kept := crd.Spec.Versions[:0]
		var dropped []string
		for _, v := range crd.Spec.Versions {
			if _, err := crdinfo.Lookup(next, v.Name); err != nil && !slices.Contains(crd.Status.StoredVersions, v.Name) {
				dropped = append(dropped, v.Name)
				continue
			}
			kept = append(kept, v)
		}
		if len(dropped) == 0 {
			return nil
		}
		crd.Spec.Versions = kept
		if _, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{FieldManager: r.o.FieldManager}); err != nil {
			return err
		}
		r.notify("%s: removed %s, which the apply left (owned by another field manager)", next.Name, strings.Join(dropped, ", "))
		return nil
	})
}

// verify checks every CRD after the apply: storedVersions, managedFields of removed versions,
// a dry-run server-side apply per set of managedFields versions, and plan of the same release.
func (r *runner) verify(ctx context.Context, s *StepResult) error {
	if h := r.o.Hop; h != nil && !h.Last {
		s.State, s.Detail = StateSkipped, "the path is verified after its last hop"
		return nil
	}
	v := &Verify{CRDs: []VerifyCRD{}, PlanBreaking: []string{}, InvalidOnRecreate: []ObjectFinding{}}
	r.rep.Verify = v
	var crds []*apiextensionsv1.CustomResourceDefinition
	probes := map[string]*ssaProbe{}
	for i := range r.items {
		_, next := r.items[i].CRDs()
		crd, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, next.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting %s: %w", next.Name, err)
		}
		crds = append(crds, crd)
		probes[crd.Name] = newSSAProbe(crd)
	}
	// Plan of the same release against the cluster as it is now; its read of every object
	// also gives what the server-side apply check needs (their managedFields).
	reusedBefore := r.o.Memo.Reused.Load()
	after, err := PlanRelease(ctx, r.c, Options{Next: r.o.Next, ApplyFile: r.o.ApplyFile, ChunkSize: r.o.ChunkSize, Memo: r.o.Memo,
		OnEvaluate: r.o.OnEvaluate, // its progress lines, as the first plan's
		eachObject: func(crd string, u *unstructured.Unstructured) {
			if p := probes[crd]; p != nil {
				p.see(u.GetNamespace(), u.GetName(), u.GetManagedFields())
			}
		}})
	if err != nil {
		return err
	}
	for i, crd := range crds {
		storage := crdinfo.StorageVersion(crd)
		vc := VerifyCRD{CRD: crd.Name, StorageVersion: storage, StoredVersions: crd.Status.StoredVersions, SSAFailures: []string{}}
		vc.StoredOK = slices.Equal(crd.Status.StoredVersions, []string{storage})
		if !vc.StoredOK {
			r.problem("%s: status.storedVersions is [%s], not [%s]: objects may still be stored at the other versions (kubectl crdver migrate %s)", crd.Name, strings.Join(crd.Status.StoredVersions, " "), storage, crd.Name)
		}
		if ev, _ := migrate.CompletedEvidence(r.c.Server, crd, mustCheckpoint(r.c.Server, crd.Name)); ev != nil {
			vc.Evidence = fmt.Sprintf("a completed rewrite at %s is recorded (every object accounted for, %d failed)", ev.StorageVersion, ev.Failed)
		}
		p := probes[crd.Name]
		if i >= len(after.Items) || after.Items[i].Objects.Evaluated != p.objects || after.Items[i].Census() == nil {
			// The plan did not read every object (not evaluated): read their managedFields.
			p = newSSAProbe(crd)
			if err := p.read(ctx, r, crd); err != nil {
				return err
			}
		}
		r.verifySSA(ctx, crd, p, &vc)
		v.CRDs = append(v.CRDs, vc)
	}
	v.Unchanged = r.o.Memo.Reused.Load() - reusedBefore
	r.verifyPlan(v, after)
	s.Detail = fmt.Sprintf("%d CRDs checked", len(v.CRDs))
	if n := len(v.InvalidOnRecreate); n > 0 {
		s.Detail += fmt.Sprintf("; %s invalid on re-create, left for you", countObjects(n))
	}
	return nil
}

func mustCheckpoint(server, crd string) string {
	p, _ := migrate.DefaultCheckpointPath(server, crd)
	return p
}

// ssaProbe gathers, from a read of every object of a CRD, what the server-side apply check
// needs: the objects with managedFields entries of versions the CRD no longer has, and one
// object per distinct set of entry versions.
type ssaProbe struct {
	crd     *apiextensionsv1.CustomResourceDefinition
	objects int64
	stale   int64
	seen    map[string]bool
	probe   []types.NamespacedName
}

func newSSAProbe(crd *apiextensionsv1.CustomResourceDefinition) *ssaProbe {
	return &ssaProbe{crd: crd, seen: map[string]bool{}}
}

// see looks at one object's managedFields.
func (p *ssaProbe) see(ns, name string, entries []metav1.ManagedFieldsEntry) {
	p.objects++
	var vs []string
	stale := false
	for _, e := range entries {
		gv, err := schema.ParseGroupVersion(e.APIVersion)
		if err != nil || gv.Group != p.crd.Spec.Group {
			continue
		}
		if !slices.Contains(vs, gv.Version) {
			vs = append(vs, gv.Version)
		}
		if _, err := crdinfo.Lookup(p.crd, gv.Version); err != nil {
			stale = true
		}
	}
	if stale {
		p.stale++
	}
	sort.Strings(vs)
	if k := strings.Join(vs, ","); !p.seen[k] {
		p.seen[k] = true
		p.probe = append(p.probe, types.NamespacedName{Namespace: ns, Name: name})
	}
}

// read looks at every object's managedFields with a read of its own (metadata only).
func (p *ssaProbe) read(ctx context.Context, r *runner, crd *apiextensionsv1.CustomResourceDefinition) error {
	read, err := crdinfo.AccessVersion(crd)
	if err != nil {
		return nil
	}
	err = ownership.EachObject(ctx, r.c.Metadata, crdinfo.GVR(crd, read), r.o.ChunkSize, func(m *metav1.PartialObjectMetadata) error {
		p.see(m.Namespace, m.Name, m.ManagedFields)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the managedFields of %s: %w", crd.Name, err)
	}
	return nil
}

// verifySSA counts objects with managedFields entries of versions the CRD no longer has, and
// sends a dry-run server-side apply (an empty intent by a probe manager: the API server still
// converts every existing entry) to one object per distinct set of entry versions (p).
func (r *runner) verifySSA(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, p *ssaProbe, vc *VerifyCRD) {
	read, err := crdinfo.AccessVersion(crd)
	if err != nil {
		return
	}
	gvr := crdinfo.GVR(crd, read)
	vc.StaleManagedFields = p.stale
	for _, m := range p.probe {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(gvr.GroupVersion().String())
		u.SetKind(crd.Spec.Names.Kind)
		u.SetName(m.Name)
		u.SetNamespace(m.Namespace)
		body, _ := u.MarshalJSON()
		_, err := r.c.Dynamic.Resource(gvr).Namespace(m.Namespace).Patch(ctx, m.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "kubectl-crdver-verify", DryRun: []string{metav1.DryRunAll}})
		vc.SSAChecked++
		if err != nil {
			where := m.Name
			if m.Namespace != "" {
				where = m.Namespace + "/" + m.Name
			}
			vc.SSAFailures = append(vc.SSAFailures, where+": "+err.Error())
			r.problem("%s %s: server-side apply fails: %v", crd.Name, where, err)
		}
	}
	if vc.StaleManagedFields > 0 {
		r.problem("%s: %d objects hold managedFields entries of versions no longer in the CRD: server-side apply fails on them (kubernetes#111937)", crd.Name, vc.StaleManagedFields)
	}
}

// Intermediates are the intermediate CRDs of a planned release (kubectl crdver upgrade
// --intermediate-crds): for each CRD whose live copy lacks the new storage version, the new
// CRD with the versions it removes kept. Empty when no CRD needs one.
func Intermediates(p *plan.Report) []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, s := range p.Runbook {
		if s.Action != plan.ActionIntermediate {
			continue
		}
		for _, n := range s.CRDs {
			for i := range p.Items {
				if p.Items[i].CRD != n {
					continue
				}
				inter := plan.IntermediateFor(&p.Items[i])
				if inter == nil {
					_, inter = p.Items[i].CRDs()
				}
				out = append(out, inter)
			}
		}
	}
	return out
}
