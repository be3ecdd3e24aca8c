// Package preflight finds, before any write that re-encodes the objects of a CRD (a storage
// switch and rewrite: migrate, migrate --all, retire, upgrade), what that write would lose or
// be refused: every object is evaluated at the target version under the live CRD, with the
// API server's own code (the preview engine) and, for a conversion webhook, a round trip
// through the webhook (the convert package).
//
//   - Fields the rewrite would drop. The data of an object may be held at any version in
//     status.storedVersions (and the storage version). For each such version H other than the
//     target T, every object is read at H (a paged LIST through the API server) and at T:
//     with conversion strategy None, the API server's read path in T (preview.Read: decode at
//     H, convert by apiVersion, prune in T's schema); with a webhook, H → T → H through the
//     webhook (convert.RunSource, its pruned-fields and round-trip checks). Fields present at H
//     and gone at T are lost by a rewrite at T.
//   - Writes that would be rejected. Every object is read at T (a paged LIST) and the rewrite's
//     write of it at T is sent as a server-side dry run (nothing is written): the API server's
//     own decoding, defaulting, validation with ratcheting and admission say whether the
//     rewrite would fail on it, after the storage switch.
//
// It has no command-line code: it returns a Report, and Advice/BackupCommands say how to keep
// the data in words a caller prints.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/preview"
)

// Options of a check.
type Options struct {
	// Target is the version the objects would be rewritten at ("" is the storage version).
	Target string
	// ChunkSize is the page size of the lists (0: 500). Memory is bounded by a page.
	ChunkSize int64
	// Progress, when set, is called after each page with the objects evaluated so far and
	// the number to evaluate (-1 while unknown). It is called from one goroutine.
	Progress func(done, total int64)
	// Transport reaches the CRD's conversion webhook (unused for strategy None). Without it,
	// what a webhook conversion loses is reported as unknown.
	Transport convert.Transport
	// MaxListed bounds the objects listed by name per kind of finding (0: 100); the counts
	// are complete.
	MaxListed int
	// SkipRejections leaves out the rejection pass (its dry-run writes need update rights):
	// only what the rewrite would lose is evaluated.
	SkipRejections bool
}

// Loss is an object whose fields a rewrite at the target would drop.
type Loss struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// HeldAt is the version the fields are readable at (the data is there).
	HeldAt string `json:"heldAt"`
	// Fields are the JSON paths that would be gone (.spec.acls[0].operation).
	Fields []string `json:"fields"`
}

// Rejection is an object whose no-op update at the target the API server would refuse.
type Rejection struct {
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name"`
	Errors    []string `json:"errors"`
}

// Report is what a check found. Its JSON form is the "preflight" section of migrate's and
// retire's -o json output: fields may be added, never renamed or removed.
type Report struct {
	CRD      string `json:"crd"`
	Group    string `json:"group"`
	Resource string `json:"resource"`
	Target   string `json:"target"`
	Strategy string `json:"strategy"`
	// Objects is the number of objects evaluated (read at the target; 0 when the rejection
	// pass was skipped).
	Objects int64 `json:"objects"`
	// HoldingVersions are the versions objects' data may be held at (status.storedVersions
	// and the storage version, served ones): a backup reads every one of them.
	HoldingVersions []string `json:"holdingVersions"`
	// Compared are the holding versions other than the target whose objects were compared
	// with the target.
	Compared []string `json:"compared"`
	// LossCount is the number of objects (per holding version) that would lose fields;
	// Losses lists them (at most Options.MaxListed).
	LossCount int64  `json:"lossCount"`
	Losses    []Loss `json:"losses"`
	// RejectedCount is the number of objects whose write would be rejected; Rejected lists
	// them (at most Options.MaxListed).
	RejectedCount int64       `json:"rejectedCount"`
	Rejected      []Rejection `json:"rejected"`
	// Unknown says what could not be evaluated: the answer there is not known.
	Unknown []string `json:"unknown"`
	// Backup are the commands that save every object at each version that holds data.
	Backup []string `json:"backup"`
	// NotServed are the stored versions not served (unknown above), and how to serve them.
	NotServed []NotServed `json:"notServed,omitempty"`
}

// Safe reports whether a rewrite at the target loses nothing and is refused for no object,
// as far as is known: nothing is unknown.
func (r *Report) Safe() bool {
	return r.LossCount == 0 && r.RejectedCount == 0 && len(r.Unknown) == 0
}

// LosesData reports whether objects would lose fields, or whether that is unknown.
func (r *Report) LosesData() bool { return r.LossCount > 0 || len(r.Unknown) > 0 }

// HoldingVersions are the versions the data of crd's objects may be held at and can be read
// at, in priority order: the storage version and the other versions of status.storedVersions,
// the served ones.
func HoldingVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	holding := append([]string{crdinfo.StorageVersion(crd)}, crd.Status.StoredVersions...)
	out := []string{}
	for _, v := range crdinfo.VersionNames(crd) {
		if slices.Contains(holding, v) && crdinfo.IsServed(crd, v) {
			out = append(out, v)
		}
	}
	return out
}

// BackupCommands are the commands that save every object of crd at each of versions, read at
// that version: `kubectl get <plural>.<version>.<group> -A -o yaml > <plural>.<version>.backup.yaml`.
// A plain `kubectl get <plural>` reads at the preferred version, which already prunes what
// that version's schema does not know: it is no backup of data held at another version.
func BackupCommands(group, plural string, versions []string) []string {
	out := make([]string, 0, len(versions))
	for _, v := range versions {
		out = append(out, fmt.Sprintf("kubectl get %s.%s.%s -A -o yaml > %s.%s.backup.yaml", plural, v, group, plural, v))
	}
	return out
}

// Advice says how to keep what the rewrite would lose and how to fix what it would be
// refused, one step a line, in the order to do them. It names no flag of any command: the
// caller adds how to go on anyway.
func Advice(r *Report) []string {
	var out []string
	if r.LossCount > 0 || len(r.Unknown) > 0 {
		out = append(out, "back up the objects at every version that holds their data (a plain kubectl get reads at the preferred version, which already drops those fields):")
		for _, c := range r.Backup {
			out = append(out, "  "+c)
		}
	}
	if r.LossCount > 0 {
		held := map[string]bool{}
		for _, l := range r.Losses {
			held[l.HeldAt] = true
		}
		from := sortedKeys(held)
		out = append(out, fmt.Sprintf("convert the objects listed to the %s shape before the rewrite (the fields listed are not in %s's schema: move their values to the fields %s has for them), e.g. with the conversion tool of the project that owns %s, and apply them at %s; data held at %s is kept until an object is rewritten",
			r.Target, r.Target, r.Target, r.CRD, r.Target, strings.Join(from, ", ")))
	}
	if r.RejectedCount > 0 {
		out = append(out, fmt.Sprintf("fix the objects listed so that a write at %s is accepted (the errors are the API server's), e.g. kubectl edit %s.%s.%s NAME -n NAMESPACE", r.Target, r.Resource, r.Target, r.Group))
	}
	out = append(out, serveAdvice(r)...)
	if len(r.Unknown) > 0 {
		out = append(out, "what is unknown could not be evaluated: make it evaluable (see the reasons) before writing")
	}
	return out
}

// Check evaluates every object of crd (fresh from the cluster) at the target version under
// the live CRD. It writes nothing. It fails only when it cannot complete (the target is not
// a served version, a list fails, ctx ends); what it cannot evaluate is in Report.Unknown.
func Check(ctx context.Context, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition, o Options) (*Report, error) {
	if o.ChunkSize <= 0 {
		o.ChunkSize = 500
	}
	if o.MaxListed <= 0 {
		o.MaxListed = 100
	}
	storage := crdinfo.StorageVersion(crd)
	target := o.Target
	if target == "" {
		target = storage
	}
	v, err := crdinfo.Lookup(crd, target)
	if err != nil {
		return nil, err
	}
	r := &Report{CRD: crd.Name, Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural, Target: target,
		Strategy: convert.Strategy(crd), HoldingVersions: []string{}, Compared: []string{},
		Losses: []Loss{}, Rejected: []Rejection{}, Unknown: []string{}}
	if !v.Served {
		// The rewrite then writes at another served version and the API server converts:
		// not evaluated, so not called safe.
		r.Unknown = append(r.Unknown, fmt.Sprintf("%s is not served: objects are written at another version and converted to it, which the preflight does not evaluate (serve %s to check)", target, target))
		r.Backup = BackupCommands(r.Group, r.Resource, crdinfo.ServedVersions(crd))
		return r, nil
	}

	r.HoldingVersions = HoldingVersions(crd)
	for _, h := range r.HoldingVersions {
		if h != target {
			r.Compared = append(r.Compared, h)
		}
	}
	for _, h := range crd.Status.StoredVersions {
		if crdinfo.Has(crd, h) && !crdinfo.IsServed(crd, h) {
			r.Unknown = append(r.Unknown, unservedStoredUnknown(h))
			r.NotServed = append(r.NotServed, notServed(crd, h))
		}
	}
	for _, h := range crd.Status.StoredVersions {
		if !crdinfo.Has(crd, h) {
			r.Unknown = append(r.Unknown, missingStoredUnknown(h))
		}
	}
	r.Backup = BackupCommands(r.Group, r.Resource, r.HoldingVersions)

	// The CRD as it will be once target is the storage version: what the write is judged by.
	next := crd.DeepCopy()
	for i := range next.Spec.Versions {
		next.Spec.Versions[i].Storage = next.Spec.Versions[i].Name == target
	}
	p, err := preview.NewPreviewer(next)
	if err != nil {
		r.Unknown = append(r.Unknown, fmt.Sprintf("objects not evaluated: %v", err))
		return r, nil
	}
	e := &evaluation{ctx: ctx, dyn: dyn, crd: crd, o: o, r: r, p: p, total: -1}

	if !o.SkipRejections {
		if err := e.rejections(); err != nil && !errors.Is(err, errStopPass) {
			return r, err
		}
	}
	for _, h := range r.Compared {
		if r.Strategy == string(apiextensionsv1.WebhookConverter) {
			err = e.webhookLosses(h)
		} else {
			err = e.noneLosses(h)
		}
		if err != nil {
			return r, err
		}
	}
	sort.SliceStable(r.Losses, func(i, j int) bool {
		return objKey(r.Losses[i].Namespace, r.Losses[i].Name) < objKey(r.Losses[j].Namespace, r.Losses[j].Name)
	})
	sort.SliceStable(r.Rejected, func(i, j int) bool {
		return objKey(r.Rejected[i].Namespace, r.Rejected[i].Name) < objKey(r.Rejected[j].Namespace, r.Rejected[j].Name)
	})
	return r, nil
}

type evaluation struct {
	ctx         context.Context
	dyn         dynamic.Interface
	crd         *apiextensionsv1.CustomResourceDefinition
	o           Options
	r           *Report
	p           *preview.Previewer
	done, total int64
}

func (e *evaluation) progress(n int) {
	e.done += int64(n)
	if e.o.Progress != nil {
		e.o.Progress(e.done, e.total)
	}
}

// eachPage lists the objects at version v a page at a time and hands each page to fn. An
// expired continue token (410) continues from the inconsistent token the error carries.
func (e *evaluation) eachPage(v string, fn func([]unstructured.Unstructured) error) error {
	ri := e.dyn.Resource(crdinfo.GVR(e.crd, v))
	cont := ""
	for first := true; ; first = false {
		if err := e.ctx.Err(); err != nil {
			return err
		}
		list, err := ri.List(e.ctx, metav1.ListOptions{Limit: e.o.ChunkSize, Continue: cont})
		if err != nil {
			var st apierrors.APIStatus
			if apierrors.IsResourceExpired(err) && errors.As(err, &st) && st.Status().ListMeta.Continue != "" && cont != "" {
				cont = st.Status().ListMeta.Continue
				continue
			}
			return fmt.Errorf("listing %s at %s: %w", e.crd.Name, v, err)
		}
		if first && e.total < 0 {
			n := int64(len(list.Items))
			if rem := list.GetRemainingItemCount(); rem != nil {
				n += *rem
			} else if list.GetContinue() != "" {
				n = -1
			}
			if n >= 0 {
				e.total = n * int64(1+len(e.r.Compared))
			}
		}
		if err := fn(list.Items); err != nil {
			return err
		}
		e.progress(len(list.Items))
		if cont = list.GetContinue(); cont == "" {
			return nil
		}
	}
}

// rejections sends the rewrite's write of every object, read at the target, as a
// server-side dry run: the API server runs its whole update path (decoding, defaulting,
// validation with ratcheting against the object as it holds it, admission webhooks) and
// writes nothing. The preview engine's update models that path, but the old object the API
// server ratchets against is decoded from etcd at the version it is encoded at, which a model
// from the listed object cannot see (a field the target dropped makes the object "changed"):
// the API server itself is the oracle. Validation is at the request version, so the answer
// is the same before and after the storage switch.
func (e *evaluation) rejections() error {
	ri := e.dyn.Resource(crdinfo.GVR(e.crd, e.r.Target))
	return e.eachPage(e.r.Target, func(items []unstructured.Unstructured) error {
		// A page's dry runs, dryRunWorkers at a time; the outcomes are recorded in list order.
		type outcome struct {
			errs    []string
			unknown string
			err     error
		}
		out := make([]outcome, len(items))
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < dryRunWorkers && w < len(items); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= len(items) || e.ctx.Err() != nil {
						return
					}
					out[i].errs, out[i].unknown, out[i].err = e.dryRun(ri, &items[i])
				}
			}()
		}
		wg.Wait()
		if err := e.ctx.Err(); err != nil {
			return err
		}
		for i := range items {
			e.r.Objects++
			switch o := out[i]; {
			case o.err != nil:
				return o.err
			case o.unknown != "":
				e.r.Unknown = append(e.r.Unknown, o.unknown)
				return errStopPass
			case o.errs != nil:
				e.rejected(&items[i], o.errs)
			}
		}
		return nil
	})
}

// dryRunWorkers is how many dry-run writes are in flight.
const dryRunWorkers = 8

// dryRun sends u's write at the target as a dry run: the API server's reasons when it would
// be rejected (nil when accepted or gone), or why the answer is unknown (no right to update).
func (e *evaluation) dryRun(ri dynamic.NamespaceableResourceInterface, u *unstructured.Unstructured) ([]string, string, error) {
	var w dynamic.ResourceInterface = ri
	if ns := u.GetNamespace(); ns != "" {
		w = ri.Namespace(ns)
	}
	for attempt := 1; ; attempt++ {
		_, err := w.Update(e.ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil, "", nil
		case apierrors.IsConflict(err) && attempt < 5:
			// Changed since listed: judge it as it is now.
			fresh, gerr := w.Get(e.ctx, u.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) {
				return nil, "", nil
			}
			if gerr != nil {
				return nil, "", fmt.Errorf("%s: reading it at %s: %w", objKey(u.GetNamespace(), u.GetName()), e.r.Target, gerr)
			}
			u = fresh
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) && isAdmissionDenial(err) || apierrors.IsBadRequest(err):
			return statusTexts(err), "", nil
		case apierrors.IsForbidden(err):
			// No right to update (a dry run needs the rights a write needs): the rest would be
			// refused alike.
			return nil, fmt.Sprintf("whether the API server accepts writes at %s is unknown: a dry-run write needs update rights on %s (%s)", e.r.Target, e.crd.Spec.Names.Plural, statusTexts(err)[0]), nil
		default:
			return nil, "", fmt.Errorf("%s: a dry-run write at %s (nothing is written): %w", objKey(u.GetNamespace(), u.GetName()), e.r.Target, err)
		}
	}
}

// isAdmissionDenial tells an admission webhook's or policy's "no" (a 403 whose message says
// so) from missing rights.
func isAdmissionDenial(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "admission webhook") || strings.Contains(msg, "ValidatingAdmissionPolicy")
}

// statusTexts are the API server's reasons: "field: message" per cause, else its message.
func statusTexts(err error) []string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		if d := st.Status().Details; d != nil && len(d.Causes) > 0 {
			out := make([]string, 0, len(d.Causes))
			for _, c := range d.Causes {
				if c.Field != "" && !strings.HasPrefix(c.Message, c.Field) {
					out = append(out, c.Field+": "+c.Message)
				} else {
					out = append(out, c.Message)
				}
			}
			return out
		}
		if m := st.Status().Message; m != "" {
			return []string{m}
		}
	}
	return []string{err.Error()}
}

// errStopPass ends a pass early without failing the check.
var errStopPass = errors.New("pass stopped")

func (e *evaluation) rejected(u *unstructured.Unstructured, errs []string) {
	e.r.RejectedCount++
	if len(e.r.Rejected) < e.o.MaxListed {
		e.r.Rejected = append(e.r.Rejected, Rejection{Namespace: u.GetNamespace(), Name: u.GetName(), Errors: errs})
	}
}

func (e *evaluation) lost(ns, name, heldAt string, fields []string) {
	e.r.LossCount++
	if len(e.r.Losses) < e.o.MaxListed {
		e.r.Losses = append(e.r.Losses, Loss{Namespace: ns, Name: name, HeldAt: heldAt, Fields: fields})
	}
}

// noneLosses: conversion None. Every object as read at h, then read at the target by the API
// server's read path (decoded at h, apiVersion switched, pruned in the target's schema): the
// fields present at h and absent at the target are lost.
func (e *evaluation) noneLosses(h string) error {
	return e.eachPage(h, func(items []unstructured.Unstructured) error {
		for i := range items {
			u := &items[i]
			body, err := u.MarshalJSON()
			if err != nil {
				return err
			}
			rr, err := e.p.Read(body, e.r.Target)
			if err != nil {
				e.r.Unknown = append(e.r.Unknown, fmt.Sprintf("%s: reading it at %s: %v", objKey(u.GetNamespace(), u.GetName()), e.r.Target, err))
				continue
			}
			if fields := lostFields(u.Object, rr.Object); len(fields) > 0 {
				e.lost(u.GetNamespace(), u.GetName(), h, fields)
			}
		}
		return nil
	})
}

// lostFields are the paths (outside apiVersion, kind and metadata) present in held and
// missing in at, and lists that became shorter.
func lostFields(held, at map[string]any) []string {
	strip := func(m map[string]any) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			if k != "apiVersion" && k != "kind" && k != "metadata" {
				out[k] = v
			}
		}
		return out
	}
	var out []string
	for _, d := range convert.Diff(strip(held), strip(at)) {
		if strings.HasPrefix(d.Detail, "lost:") || strings.HasPrefix(d.Detail, "list length") {
			out = append(out, d.Path)
		}
	}
	return out
}

// webhookLosses: a conversion webhook. Every object as read at h goes h → target → h through
// the webhook with the API server's response checks; pruned and lost fields are losses.
func (e *evaluation) webhookLosses(h string) error {
	if e.o.Transport == nil {
		e.r.Unknown = append(e.r.Unknown, fmt.Sprintf("objects held at %s: the conversion webhook was not reached (no way to reach it was given), so what converting them to %s loses is unknown", h, e.r.Target))
		return nil
	}
	src := &progressSource{src: convert.NewClusterSource(e.dyn, e.crd, h, convert.Selection{AllNamespaces: true, PageSize: e.o.ChunkSize}), e: e}
	rep, err := convert.RunSource(e.ctx, convert.Options{CRD: e.crd, To: e.r.Target, RoundTrip: true, Transport: e.o.Transport}, src)
	if err != nil {
		return fmt.Errorf("round-tripping the objects held at %s through the conversion webhook: %w", h, err)
	}
	if rep.Unreachable != "" {
		e.r.Unknown = append(e.r.Unknown, fmt.Sprintf("objects held at %s: the conversion webhook could not be reached (%s), so what converting them to %s loses is unknown", h, rep.Unreachable, e.r.Target))
		return nil
	}
	byObject := map[string][]string{}
	var order []string
	other := map[string]int{}
	for _, f := range rep.Findings {
		switch {
		case f.Check == convert.CheckPruned || f.Check == convert.CheckRoundTrip:
			if _, ok := byObject[f.Object]; !ok {
				order = append(order, f.Object)
			}
			path := f.Path
			if path == "" {
				path = "."
			}
			if !slices.Contains(byObject[f.Object], path) {
				byObject[f.Object] = append(byObject[f.Object], path)
			}
		case f.Severity == convert.SeverityError:
			other[f.Check]++
		}
	}
	for _, obj := range order {
		ns, name, ok := strings.Cut(obj, "/")
		if !ok {
			ns, name = "", obj
		}
		e.lost(ns, name, h, byObject[obj])
	}
	checks := make([]string, 0, len(other))
	for c := range other {
		checks = append(checks, c)
	}
	sort.Strings(checks)
	for _, c := range checks {
		e.r.Unknown = append(e.r.Unknown, fmt.Sprintf("objects held at %s: the conversion webhook failed check %s on %d objects (kubectl crdver convert %s --to %s --from-cluster --round-trip shows them): the API server would fail those conversions too", h, c, other[c], e.crd.Name, e.r.Target))
	}
	return nil
}

// progressSource counts the pages of a convert source for the progress callback.
type progressSource struct {
	src convert.Source
	e   *evaluation
}

func (s *progressSource) Next(ctx context.Context) ([]convert.Object, error) {
	page, err := s.src.Next(ctx)
	if err == nil {
		s.e.progress(len(page))
	}
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	return page, err
}

func objKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
