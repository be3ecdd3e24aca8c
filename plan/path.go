package plan

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// PathRelease is one release of a path: its name (the --via argument or the folder name),
// what `-f` takes to apply it, and its CRDs.
type PathRelease struct {
	Name string                                      `json:"name"`
	File string                                      `json:"file"`
	CRDs []*apiextensionsv1.CustomResourceDefinition `json:"-"`
}

func (r PathRelease) crd(name string) *apiextensionsv1.CustomResourceDefinition {
	for _, c := range r.CRDs {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// ReleaseVersion is the version a release's name carries: the name itself ("v1.5.5",
// "0.51.0") or its last "-" separated part ("source-controller-v1.6.2"), parsed by
// apimachinery's semantic (then generic) version parser; nil when it has none.
func ReleaseVersion(name string) *utilversion.Version {
	for _, s := range []string{name, name[strings.LastIndex(name, "-")+1:]} {
		if v, err := utilversion.ParseSemantic(s); err == nil {
			return v
		}
		if v, err := utilversion.ParseGeneric(s); err == nil {
			return v
		}
	}
	return nil
}

// SortReleases orders release names by the version they carry (ReleaseVersion), oldest first,
// and returns the names that carry none apart (not releases: e.g. a samples folder).
func SortReleases(names []string) (sorted, skipped []string) {
	for _, n := range names {
		if ReleaseVersion(n) == nil {
			skipped = append(skipped, n)
			continue
		}
		sorted = append(sorted, n)
	}
	sort.SliceStable(sorted, func(i, j int) bool { return ReleaseVersion(sorted[i]).LessThan(ReleaseVersion(sorted[j])) })
	return sorted, skipped
}

// PathOptions say which releases a path may take and how each hop is planned.
type PathOptions struct {
	// Via are the releases between the cluster and Target, oldest first.
	Via    []PathRelease
	Target PathRelease
	// Release is the template of each hop's plan.Release (KubeVersion, ServerDryRun, Plan,
	// ChunkSize, OnEvaluate); Next, Live, Sources and Runbook.ApplyFile are set per hop.
	Release ReleaseOptions
	// Probe checks, before any write, that the conversion a hop's rewrite relies on answers
	// (ProbeConversion); nil: not checked (the report says so).
	Probe func(ctx context.Context, rw *PathRewrite, conv, live *apiextensionsv1.CustomResourceDefinition) error
	// Convert converts objects through a conversion webhook, to take the live objects through
	// the hops before each later hop's plan (WebhookConvert); nil: objects an earlier hop
	// converts through a webhook are not evaluated at the hops after it (a note says so).
	Convert ConvertFunc
}

// DefaultProbeTimeout bounds each question Path asks a conversion webhook when PathOptions
// name no Probe or Convert of their own.
const DefaultProbeTimeout = 10 * time.Second

// withDefaults asks the cluster's webhooks when o names no Probe or Convert of its own and
// c reaches a cluster.
func (o PathOptions) withDefaults(c ReleaseClients) PathOptions {
	if c.CRDs != nil && c.Kube != nil {
		if o.Probe == nil {
			o.Probe = ProbeConversion(c, DefaultProbeTimeout)
		}
		if o.Convert == nil {
			o.Convert = WebhookConvert(c, DefaultProbeTimeout)
		}
	}
	return o
}

// PathReport is the release path from the live state to the target: per CRD whether the
// target is reachable directly, the hops, and each hop's plan.
type PathReport struct {
	Target string `json:"target"`
	// Direct: every CRD reaches the target in one hop (the upgrade of the target alone).
	Direct bool `json:"direct"`
	// Reachable: the hops reach the target for every CRD (false: a CRD needs a release that
	// was not given; Verdict says which versions).
	Reachable bool `json:"reachable"`
	// Verdict is the path in one line: the hop, the CRD, the versions and the reason.
	Verdict string    `json:"verdict"`
	CRDs    []PathCRD `json:"crds"`
	Hops    []Hop     `json:"hops"`
	// ExitCode is plan's exit status for the path: 1 when it is not reachable or a hop's
	// plan exits 1, else 0.
	ExitCode int `json:"exitCode"`
}

// PathCRD is one CRD's way to the target.
type PathCRD struct {
	CRD string `json:"crd"`
	// StoredVersions are the versions its objects may be encoded at now (status.storedVersions).
	StoredVersions []string `json:"storedVersions"`
	Direct         bool     `json:"direct"`
	// Via are the releases it needs before the target.
	Via []string `json:"via"`
	// Reason says why the direct jump does or does not work, one sentence.
	Reason string `json:"reason"`
}

// Hop is one release the path applies, with its plan (plan.Release) and the rewrites it makes.
type Hop struct {
	Index   int    `json:"index"`
	Release string `json:"release"`
	File    string `json:"file"`
	// CRDs are the CRDs this hop is taken for (empty for the target: every CRD).
	CRDs []string `json:"crds"`
	Why  string   `json:"why"`
	// Live: the hop was planned against the cluster (the first hop); later hops are planned
	// offline against the CRDs the hops before leave, with the live objects as the hops
	// before leave them (taken through each earlier hop's conversion and schema: consented
	// losses gone), so every object is judged at every hop before any write (upgrade plans
	// each hop against the cluster again before its writes).
	Live     bool          `json:"live"`
	Plan     *Report       `json:"plan"`
	Rewrites []PathRewrite `json:"rewrites"`
}

// PathRewrite is a re-encoding a hop makes and the conversion it relies on.
type PathRewrite struct {
	CRD  string   `json:"crd"`
	From []string `json:"from"`
	To   string   `json:"to"`
	// Conversion is the converter: "None", or the webhook ("service ns/name:port/path" or
	// the URL) of Release's CRD.
	Conversion string `json:"conversion"`
	// Release whose CRD's conversion is used: the live one ("live") or the hop's.
	Release string `json:"release"`
	// Checked: the webhook was asked to convert before the first write; Answers its answer;
	// Problem what failed (or why it was not checked).
	Checked bool   `json:"checked"`
	Answers bool   `json:"answers"`
	Problem string `json:"problem,omitempty"`
}

// pathState is a CRD as a hop leaves it: its definition and the versions objects are stored at.
type pathState struct {
	crd    *apiextensionsv1.CustomResourceDefinition
	stored []string
}

// reach decides whether a CRD in state cur reaches next's CRD in one upgrade, as upgrade
// carries it out: stored versions next still has need no rewrite across releases; others are
// rewritten at next's storage version under the live CRD's conversion when the live CRD has
// that version, else under an intermediate CRD with next's conversion, which must know them
// (a webhook knows the versions its release lists; None only relabels, which keeps data only
// between identical schemas). It returns why, and the rewrite's converter.
func reach(cur pathState, next *apiextensionsv1.CustomResourceDefinition, nextName string) (bool, string, *PathRewrite) {
	if next == nil || cur.crd == nil {
		return true, "", nil
	}
	target := crdinfo.StorageVersion(next)
	var missing []string
	for _, v := range cur.stored {
		if !crdinfo.Has(next, v) {
			missing = append(missing, v)
		}
	}
	rw := &PathRewrite{CRD: next.Name, To: target}
	for _, v := range cur.stored {
		if v != target {
			rw.From = append(rw.From, v)
		}
	}
	if len(rw.From) == 0 {
		rw = nil
	}
	if len(missing) == 0 {
		if rw != nil {
			conv := next
			rw.Release = nextName
			if crdinfo.Has(cur.crd, target) {
				conv, rw.Release = cur.crd, "live"
			}
			rw.Conversion = conversionText(conv)
		}
		return true, fmt.Sprintf("%s keeps every stored version (%s)", nextName, strings.Join(cur.stored, ", ")), rw
	}
	if crdinfo.Has(cur.crd, target) {
		rw.Release, rw.Conversion = "live", conversionText(cur.crd)
		return true, fmt.Sprintf("the live CRD has %s's storage version %s: its conversion (%s) rewrites %s there before the apply", nextName, target, rw.Conversion, strings.Join(missing, ", ")), rw
	}
	rw.Release, rw.Conversion = nextName, conversionText(next)
	if strategyOf(next) == apiextensionsv1.WebhookConverter {
		return false, fmt.Sprintf("objects are stored at %s, which %s no longer has, and the live CRD lacks its storage version %s: the rewrite would go through %s's conversion webhook (%s), which does not know %s",
			strings.Join(missing, ", "), nextName, target, nextName, rw.Conversion, strings.Join(missing, ", ")), rw
	}
	for _, v := range missing {
		var lost []string
		for _, ch := range compareVersions(cur.crd, v, next, target) {
			if ch.Effect == EffectLossy {
				lost = append(lost, orEmpty(ch.Path, "the schema"))
			}
		}
		if len(lost) > 0 {
			return false, fmt.Sprintf("objects are stored at %s, which %s no longer has, and the live CRD lacks its storage version %s: conversion None relabels %s objects as %s, whose schema lacks %s (pruned)",
				strings.Join(missing, ", "), nextName, target, v, target, strings.Join(firstN(lost, 3), ", ")), rw
		}
	}
	return true, fmt.Sprintf("objects stored at %s are relabelled %s by conversion None, whose schema keeps every field of theirs", strings.Join(missing, ", "), target), rw
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string{}, s[:n]...), fmt.Sprintf("%d more", len(s)-n))
}

// conversionText names a CRD's converter: None, or its webhook's service or URL.
func conversionText(crd *apiextensionsv1.CustomResourceDefinition) string {
	if strategyOf(crd) != apiextensionsv1.WebhookConverter || crd.Spec.Conversion.Webhook == nil || crd.Spec.Conversion.Webhook.ClientConfig == nil {
		return "None"
	}
	cc := crd.Spec.Conversion.Webhook.ClientConfig
	if cc.URL != nil {
		return "webhook " + *cc.URL
	}
	if s := cc.Service; s != nil {
		port := int32(443)
		if s.Port != nil {
			port = *s.Port
		}
		p := ""
		if s.Path != nil {
			p = *s.Path
		}
		return fmt.Sprintf("webhook service %s/%s:%d%s", s.Namespace, s.Name, port, p)
	}
	return "webhook"
}

// after is the state a CRD is left in by an upgrade to crd: its storage version alone stored.
func after(crd *apiextensionsv1.CustomResourceDefinition) pathState {
	return pathState{crd: crd, stored: []string{crdinfo.StorageVersion(crd)}}
}

// route finds, for one CRD, the releases of via (indexes) it needs before the target: none
// when the target is reached directly, else the latest release that takes it one step on
// (preferring one from which the target is then reached). ok is false when none does.
func route(cur pathState, via []PathRelease, target PathRelease, name string) (hops []int, reason string, ok bool) {
	pos := 0
	first := ""
	for {
		good, why, _ := reach(cur, target.crd(name), target.Name)
		if first == "" {
			first = why
		}
		if good {
			return hops, first, true
		}
		pick := -1
		for pass := 0; pass < 2 && pick < 0; pass++ {
			for i := len(via) - 1; i >= pos; i-- {
				c := via[i].crd(name)
				if c == nil {
					continue
				}
				if ok, _, _ := reach(cur, c, via[i].Name); !ok {
					continue
				}
				nxt := after(c)
				if slices.Equal(nxt.stored, cur.stored) && crdinfo.StorageVersion(cur.crd) == crdinfo.StorageVersion(c) {
					continue // no progress
				}
				if pass == 0 {
					if ok, _, _ := reach(nxt, target.crd(name), target.Name); !ok {
						continue
					}
				}
				pick = i
				break
			}
		}
		if pick < 0 {
			return hops, first, false
		}
		hops = append(hops, pick)
		cur, pos = after(via[pick].crd(name)), pick+1
	}
}

// Path plans the release path from the cluster (c, as Release reads it) to o.Target through
// the fewest of o.Via: per CRD, whether the target is reached directly (reach), else which
// release it needs first; then each hop's plan.Release (the first against the cluster, the
// others offline against the CRDs the hops before leave) and every rewrite's conversion,
// checked with o.Probe.
func Path(ctx context.Context, c ReleaseClients, o PathOptions) (*PathReport, error) {
	o = o.withDefaults(c)
	rep := &PathReport{Target: o.Target.Name, CRDs: []PathCRD{}, Hops: []Hop{}, Reachable: true}
	live := map[string]*apiextensionsv1.CustomResourceDefinition{}
	names := crdNames(append(append([]PathRelease{}, o.Via...), o.Target))
	for _, n := range names {
		l, err := liveCRD(ctx, c, o.Release, n)
		if err != nil {
			return rep, err
		}
		if l != nil {
			live[n] = l
		}
	}
	need := map[int][]string{}
	var blocked []string
	for _, n := range names {
		l := live[n]
		if l == nil || o.Target.crd(n) == nil {
			continue
		}
		pc := PathCRD{CRD: n, StoredVersions: storedOf(l), Via: []string{}}
		hops, why, ok := route(pathState{crd: l, stored: storedOf(l)}, o.Via, o.Target, n)
		pc.Direct, pc.Reason = len(hops) == 0 && ok, why
		for _, h := range hops {
			pc.Via = append(pc.Via, o.Via[h].Name)
			need[h] = append(need[h], n)
		}
		if !ok {
			rep.Reachable = false
			blocked = append(blocked, fmt.Sprintf("%s: %s; no release given (--via, --releases) has %s's stored versions and a storage version %s keeps: give the release whose conversion converts them",
				n, why, n, o.Target.Name))
		}
		rep.CRDs = append(rep.CRDs, pc)
	}
	var idx []int
	for h := range need {
		idx = append(idx, h)
	}
	sort.Ints(idx)
	for _, h := range idx {
		rep.Hops = append(rep.Hops, Hop{Release: o.Via[h].Name, File: o.Via[h].File, CRDs: need[h],
			Why: directReasons(rep.CRDs, need[h])})
	}
	rep.Hops = append(rep.Hops, Hop{Release: o.Target.Name, File: o.Target.File, CRDs: []string{}, Why: "the target"})
	rep.Direct = len(rep.Hops) == 1 && rep.Reachable

	rels := make([]PathRelease, 0, len(idx)+1)
	for _, h := range idx {
		rels = append(rels, o.Via[h])
	}
	if err := planHops(ctx, c, o, rep, append(rels, o.Target), live); err != nil {
		return rep, err
	}
	finishPath(rep, blocked)
	return rep, nil
}

// finishPath sets the path's exit code and verdict.
func finishPath(rep *PathReport, blocked []string) {
	rep.ExitCode = 0
	if !rep.Reachable {
		rep.ExitCode = 1
	}
	for _, h := range rep.Hops {
		if h.Plan != nil && h.Plan.ExitCode(false) != 0 {
			rep.ExitCode = 1
		}
		for _, rw := range h.Rewrites {
			if rw.Conversion != "None" && !rw.Answers {
				rep.ExitCode = 1
			}
		}
	}
	rep.Verdict = pathVerdict(rep, blocked)
}

// directReasons joins the reasons of the CRDs named, CRDs with the same reason together.
func directReasons(crds []PathCRD, names []string) string {
	var reasons []string
	by := map[string][]string{}
	for _, c := range crds {
		if slices.Contains(names, c.CRD) {
			if _, ok := by[c.Reason]; !ok {
				reasons = append(reasons, c.Reason)
			}
			by[c.Reason] = append(by[c.Reason], c.CRD)
		}
	}
	var out []string
	for _, r := range reasons {
		out = append(out, strings.Join(by[r], ", ")+": "+r)
	}
	return strings.Join(out, "; ")
}

// pathVerdict is the path in one line.
func pathVerdict(r *PathReport, blocked []string) string {
	switch {
	case !r.Reachable:
		return "not reachable: " + strings.Join(blocked, "; ")
	case r.Direct:
		return fmt.Sprintf("direct: every CRD reaches %s in one upgrade", r.Target)
	}
	var parts []string
	for _, h := range r.Hops[:len(r.Hops)-1] {
		parts = append(parts, fmt.Sprintf("hop %d %s first, for %s", h.Index, h.Release, h.Why))
	}
	return fmt.Sprintf("%d hops to %s: %s", len(r.Hops), r.Target, strings.Join(parts, "; "))
}

func crdNames(rels []PathRelease) []string {
	var out []string
	for _, r := range rels {
		for _, c := range r.CRDs {
			if !slices.Contains(out, c.Name) {
				out = append(out, c.Name)
			}
		}
	}
	return out
}

// storedOf is status.storedVersions, or the storage version when the status does not say.
func storedOf(l *apiextensionsv1.CustomResourceDefinition) []string {
	if len(l.Status.StoredVersions) > 0 {
		return append([]string{}, l.Status.StoredVersions...)
	}
	return []string{crdinfo.StorageVersion(l)}
}

// liveCRD is the CRD as it is now: from the cluster, or offline from o.Live by the position
// of the same name in o.Next.
func liveCRD(ctx context.Context, c ReleaseClients, o ReleaseOptions, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	if c.CRDs == nil {
		for _, l := range o.Live {
			if l != nil && l.Name == name {
				return l, nil
			}
		}
		return nil, nil
	}
	l, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting CustomResourceDefinition %q: %w", name, err)
	}
	return l, nil
}

// ProbeConversion asks the conversion of conv (its webhook: webhookcheck's checks of its
// Service or URL, then a round trip through it the way plan judges a release's conversion,
// here of one live object read at each version rw rewrites from that live serves, to rw.To
// and back): an error says it does not answer or fails. No objects: nothing to rewrite,
// nothing to ask.
func ProbeConversion(c ReleaseClients, timeout time.Duration) func(ctx context.Context, rw *PathRewrite, conv, live *apiextensionsv1.CustomResourceDefinition) error {
	return func(ctx context.Context, rw *PathRewrite, conv, live *apiextensionsv1.CustomResourceDefinition) error {
		if c.Dynamic == nil || c.Kube == nil {
			return fmt.Errorf("not checked: no cluster")
		}
		var pairs []webhookcheck.Pair
		for _, from := range rw.From {
			if crdinfo.IsServed(live, from) && crdinfo.Has(conv, from) {
				pairs = append(pairs, webhookcheck.Pair{From: from, To: rw.To})
			}
		}
		rep, err := webhookcheck.Check(ctx, conv, webhookcheck.Options{Kube: c.Kube, Reach: webhookcheck.Reach{Timeout: timeout},
			RoundTrip: webhookcheck.RoundTripOptions{Pairs: pairs, List: func(v string) convert.Source {
				return convert.NewClusterSource(c.Dynamic, live, v, convert.Selection{AllNamespaces: true, Limit: 1})
			}}})
		if err != nil {
			return err
		}
		rt := rep.RoundTrip
		switch {
		case rep.State == webhookcheck.StateDown, rep.State == webhookcheck.StateUnreachable, rep.State == webhookcheck.StateNotAsked:
			return fmt.Errorf("%s does not answer: %s", rw.Conversion, rep.Reason())
		case rt != nil && rt.FailedCount > 0:
			e := rt.Failed[0]
			return fmt.Errorf("%s did not convert %s (%s): %s", rw.Conversion, e.Object, e.Direction, e.Detail)
		case rt == nil || rt.Objects == 0:
			rw.Problem = "no object to send at a served version: not asked"
		}
		return nil
	}
}

// Waiting are the hop's rewrites whose conversion webhook did not answer (or was not asked):
// a person must get it running first.
func (h *Hop) Waiting() []PathRewrite {
	var out []PathRewrite
	for _, rw := range h.Rewrites {
		if rw.Conversion != "None" && !rw.Answers {
			out = append(out, rw)
		}
	}
	return out
}

// Instruction is what a person must do before the hop, "" when nothing: get the conversion
// webhook each waiting rewrite relies on answering (one sentence per webhook).
func (h *Hop) Instruction() string {
	var parts []string
	for _, g := range GroupRewrites(h.Waiting()) {
		who := "release " + g.Release + "'s operator"
		if g.Release == "live" {
			who = "the installed operator"
		}
		parts = append(parts, fmt.Sprintf("%s must convert %s from %s to %s, and now: %s; deploy %s (its conversion webhook) and wait until it is ready",
			g.Conversion, strings.Join(g.CRDs, ", "), strings.Join(g.From, ", "), g.To, orEmpty(g.Problem, "not asked"), who))
	}
	return strings.Join(parts, "; ")
}

// RewriteGroup is the rewrites of several CRDs through the same conversion between the same
// versions.
type RewriteGroup struct {
	PathRewrite
	CRDs []string
}

// GroupRewrites groups rewrites by conversion, versions, release and problem, in order.
func GroupRewrites(rws []PathRewrite) []RewriteGroup {
	var out []RewriteGroup
	for _, rw := range rws {
		i := slices.IndexFunc(out, func(g RewriteGroup) bool {
			return g.Conversion == rw.Conversion && g.To == rw.To && slices.Equal(g.From, rw.From) && g.Release == rw.Release && g.Problem == rw.Problem
		})
		if i < 0 {
			out = append(out, RewriteGroup{PathRewrite: rw})
			i = len(out) - 1
		}
		out[i].CRDs = append(out[i].CRDs, rw.CRD)
	}
	return out
}

// Actions are the hop's runbook actions in order, each once.
func (h *Hop) Actions() []string {
	var out []string
	if h.Plan == nil {
		return out
	}
	for _, s := range h.Plan.Runbook {
		if !slices.Contains(out, s.Action) {
			out = append(out, s.Action)
		}
	}
	return out
}

// planHops plans each hop of rels (rep.Hops, in order) with plan.Release from the state the
// hops before leave (the first against the cluster, the others offline) and names and checks
// each rewrite's conversion.
func planHops(ctx context.Context, c ReleaseClients, o PathOptions, rep *PathReport, rels []PathRelease, live map[string]*apiextensionsv1.CustomResourceDefinition) error {
	// Each hop's plan and rewrites, from the state the hops before leave.
	state := map[string]pathState{}
	for n, l := range live {
		state[n] = pathState{crd: l, stored: storedOf(l)}
	}
	// The hops each CRD's objects go through before the hop planned (laterHopSource).
	chain := map[string][]hopStep{}
	for i := range rep.Hops {
		h := &rep.Hops[i]
		h.Index = i + 1
		rel := rels[i]
		ro := o.Release
		ro.Next = rel.CRDs
		notes := map[string]string{}
		sources := map[string]*hopSource{}
		ro.Runbook.ApplyFile = rel.File
		cl := c
		if i > 0 {
			cl = ReleaseClients{} // offline: the CRDs the hops before leave
			ro.ServerDryRun = false
			ro.Conversion.Off = true // the hop's webhook is asked by Probe, and again before the hop
			ro.Live, ro.Sources = make([]*apiextensionsv1.CustomResourceDefinition, len(rel.CRDs)), make([]ObjectSource, len(rel.CRDs))
			for j, n := range rel.CRDs {
				if s, ok := state[n.Name]; ok {
					l := s.crd.DeepCopy()
					l.Status.StoredVersions = s.stored
					ro.Live[j] = l
					if lv := live[n.Name]; lv != nil {
						src, why := laterHopSource(ctx, c, o, lv, chain[n.Name])
						if w := waitingBefore(rep.Hops[:i], n.Name); w != "" {
							src, why = nil, w
						}
						if src != nil {
							ro.Sources[j] = src
							if hs, ok := src.(*hopSource); ok {
								sources[n.Name] = hs
							}
						} else if why != "" {
							notes[n.Name] = why
						}
					}
				}
			}
		} else if c.CRDs == nil {
			// Offline: o.Release.Live and Sources name the CRDs as they are now and their
			// objects, in their own order; the first hop's plan takes them by name.
			ro.Live, ro.Sources = make([]*apiextensionsv1.CustomResourceDefinition, len(rel.CRDs)), make([]ObjectSource, len(rel.CRDs))
			for j, n := range rel.CRDs {
				for k, l := range o.Release.Live {
					if l != nil && l.Name == n.Name {
						ro.Live[j] = l
						if k < len(o.Release.Sources) {
							ro.Sources[j] = o.Release.Sources[k]
						}
					}
				}
			}
		}
		h.Live = i == 0 && c.CRDs != nil
		p, err := Release(ctx, cl, ro)
		if p != nil {
			p.Summarize()
		}
		h.Plan = p
		if err != nil {
			return fmt.Errorf("hop %d (%s): %w", h.Index, rel.Name, err)
		}
		for n, hs := range sources {
			if hs.failed != nil {
				notes[n] = "objects not evaluated at this hop: taking them through the hops before failed: " + hs.failed.Error()
			}
		}
		if p != nil {
			for k := range p.Items {
				if why := notes[p.Items[k].CRD]; why != "" {
					p.Items[k].Objects.Notes = append(p.Items[k].Objects.Notes, why)
				}
			}
		}
		h.Rewrites = rewritesOf(ctx, state, rel, live, o.Probe)
		for _, n := range rel.CRDs {
			if s, ok := state[n.Name]; ok {
				chain[n.Name] = append(chain[n.Name], hopStep{from: s, next: n, release: rel.Name})
			}
			state[n.Name] = after(n)
		}
	}
	return nil
}

// waitingBefore says why a CRD's objects are not taken through the hops before (hops): one of
// them rewrites it through a conversion webhook that did not answer ("" when none).
func waitingBefore(hops []Hop, crd string) string {
	for _, h := range hops {
		for _, rw := range h.Waiting() {
			if rw.CRD == crd {
				return fmt.Sprintf("objects not evaluated at this hop: hop %d (%s) converts them through %s, which must answer first", h.Index, h.Release, rw.Conversion)
			}
		}
	}
	return ""
}

// rewritesOf are the rewrites a release makes from state (reach), each conversion checked
// with probe against the live CRDs' objects.
func rewritesOf(ctx context.Context, state map[string]pathState, rel PathRelease, live map[string]*apiextensionsv1.CustomResourceDefinition, probe func(context.Context, *PathRewrite, *apiextensionsv1.CustomResourceDefinition, *apiextensionsv1.CustomResourceDefinition) error) []PathRewrite {
	out := []PathRewrite{}
	for _, n := range rel.CRDs {
		s, ok := state[n.Name]
		if !ok {
			continue
		}
		_, _, rw := reach(s, n, rel.Name)
		if rw != nil {
			conv := n
			if rw.Release == "live" {
				conv = s.crd
			}
			if rw.Conversion == "None" {
				rw.Checked, rw.Answers = false, true
			} else if probe != nil && live[n.Name] != nil {
				if err := probe(ctx, rw, conv, live[n.Name]); err != nil {
					rw.Checked, rw.Problem = true, err.Error()
				} else {
					rw.Checked, rw.Answers = rw.Problem == "", true
				}
			} else {
				rw.Problem = "not checked: no cluster"
			}
			out = append(out, *rw)
		}
	}
	return out
}

// PathThrough plans the path through every release of o.Via, in order, then o.Target (no
// release skipped): what upgrade resumes along once it has chosen its hops.
func PathThrough(ctx context.Context, c ReleaseClients, o PathOptions) (*PathReport, error) {
	o = o.withDefaults(c)
	rep := &PathReport{Target: o.Target.Name, CRDs: []PathCRD{}, Hops: []Hop{}, Reachable: true}
	rels := append(append([]PathRelease{}, o.Via...), o.Target)
	live := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, n := range crdNames(rels) {
		l, err := liveCRD(ctx, c, o.Release, n)
		if err != nil {
			return rep, err
		}
		if l != nil {
			live[n] = l
		}
	}
	var blocked []string
	for _, n := range crdNames(rels) {
		l := live[n]
		if l == nil {
			continue
		}
		cur := pathState{crd: l, stored: storedOf(l)}
		pc := PathCRD{CRD: n, StoredVersions: storedOf(l), Via: []string{}, Direct: len(o.Via) == 0}
		for i, r := range rels {
			next := r.crd(n)
			if next == nil {
				continue
			}
			ok, why, _ := reach(cur, next, r.Name)
			if pc.Reason == "" || !ok {
				pc.Reason = why
			}
			if !ok {
				rep.Reachable = false
				blocked = append(blocked, fmt.Sprintf("hop %d (%s), %s: %s", i+1, r.Name, n, why))
				break
			}
			if i < len(o.Via) {
				pc.Via = append(pc.Via, r.Name)
			}
			cur = after(next)
		}
		rep.CRDs = append(rep.CRDs, pc)
	}
	for _, r := range rels {
		rep.Hops = append(rep.Hops, Hop{Release: r.Name, File: r.File, CRDs: []string{}, Why: "given"})
	}
	rep.Hops[len(rep.Hops)-1].Why = "the target"
	rep.Direct = len(rels) == 1 && rep.Reachable
	if err := planHops(ctx, c, o, rep, rels, live); err != nil {
		return rep, err
	}
	finishPath(rep, blocked)
	return rep, nil
}

// HopRewrites are the rewrites upgrading the cluster as it is now to rel makes, each
// conversion checked with probe: what a hop needs answering before its first write.
func HopRewrites(ctx context.Context, c ReleaseClients, rel PathRelease, probe func(context.Context, *PathRewrite, *apiextensionsv1.CustomResourceDefinition, *apiextensionsv1.CustomResourceDefinition) error) ([]PathRewrite, error) {
	state := map[string]pathState{}
	live := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, n := range rel.CRDs {
		l, err := liveCRD(ctx, c, ReleaseOptions{}, n.Name)
		if err != nil {
			return nil, err
		}
		if l != nil {
			live[n.Name], state[n.Name] = l, pathState{crd: l, stored: storedOf(l)}
		}
	}
	return rewritesOf(ctx, state, rel, live, probe), nil
}
