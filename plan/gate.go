package plan

import (
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/ownership"
)

// managedFieldsVersions turns the census of the objects' managedFields into one row per version
// of the CRD's group (highest priority first), each writer classified by its role, with advice
// where the new CRD removes or stops serving the version. target is the version the advice
// points to (the version the new CRD is read at).
func managedFieldsVersions(c *ownership.Census, next *apiextensionsv1.CustomResourceDefinition, target string) []ManagedFieldsVersion {
	byVersion := map[string]ownership.VersionCount{}
	for _, r := range c.Versions {
		if !strings.Contains(r.Version, "/") { // another group's entry: not ours to judge
			byVersion[r.Version] = r
		}
	}
	group := next.Spec.Group
	out := []ManagedFieldsVersion{}
	for _, v := range sortedVersions(byVersion) {
		r := byVersion[v]
		mv := ManagedFieldsVersion{Version: v, Objects: r.Objects, Managers: []string{}, Writers: []ManagerWriter{}}
		ver, err := crdinfo.Lookup(next, v)
		mv.RemovedByThisChange = err != nil
		mv.UnservedByThisChange = err == nil && !ver.Served
		names := map[string]bool{}
		for _, w := range r.Managers {
			names[w.Manager] = true
			mv.Writers = append(mv.Writers, classify(w, group, v, target, mv.RemovedByThisChange, mv.UnservedByThisChange))
		}
		mv.Managers = sortedSet(names)
		out = append(out, mv)
	}
	return out
}

// classify says what one writer's entries of version v mean, and what to change when v goes.
func classify(w ownership.Writer, group, v, target string, removed, unserved bool) ManagerWriter {
	mw := ManagerWriter{Writer: w, Role: ownership.RoleOf(w.Manager, w.Operation)}
	detail := []string{w.Operation}
	if w.Subresource != "" {
		detail = append(detail, "/"+w.Subresource)
	}
	when := ""
	if w.LastWrite != nil {
		when = " on " + w.LastWrite.UTC().Format("2006-01-02")
		detail = append(detail, "last "+w.LastWrite.UTC().Format("2006-01-02"))
	}
	gv := group + "/" + v
	switch mw.Role {
	case ownership.RoleApplier:
		mw.Summary = fmt.Sprintf("%s applies manifests at apiVersion %s (%s)", w.Manager, gv, strings.Join(detail, ", "))
	case ownership.RoleOneTime:
		if w.Manager == "kubectl-create" {
			mw.Summary = fmt.Sprintf("created at %s by %s%s", v, w.Manager, when)
		} else {
			mw.Summary = fmt.Sprintf("changed once at %s by %s%s", v, w.Manager, when)
		}
	default:
		mw.Summary = fmt.Sprintf("%s last wrote %s (%s)", w.Manager, v, strings.Join(detail, ", "))
	}
	if !removed && !unserved || target == "" || target == v {
		return mw
	}
	switch mw.Role {
	case ownership.RoleApplier:
		mw.Advice = fmt.Sprintf("change the manifests of %s to apiVersion %s/%s", w.Manager, group, target)
	case ownership.RoleController:
		mw.Advice = fmt.Sprintf("if %s still writes %s, deploy a release of it that writes %s first", w.Manager, v, target)
	case ownership.RoleOneTime:
		if removed {
			mw.Advice = fmt.Sprintf("move its entries of %s to %s before %s is removed", v, target, v)
		}
	}
	return mw
}

func orEmpty(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// judge sets the item's verdict from what the plan found, by the decision table
// (decision.go): each finding has a kind, each kind a verdict, and the worst verdict wins.
func judge(live *apiextensionsv1.CustomResourceDefinition, it *Item) {
	reasons := map[Kind][]string{}
	add := func(k Kind, r string) { reasons[k] = append(reasons[k], r) }
	if !it.Apply.Allowed {
		add(KindApplyRejected, fmt.Sprintf("the API server rejects the CRD %s (see the apply errors)", it.Operation))
	}
	if live != nil && it.storedVersionsUnknown {
		var removed []string
		for _, v := range it.Versions.Removed {
			if v != it.StorageVersion.Before {
				removed = append(removed, v)
			}
		}
		if len(removed) > 0 {
			add(KindUnknown, fmt.Sprintf("status.storedVersions of the live CRD is not known (it was read without status): if it lists %s, which the new CRD removes, the API server rejects the update and objects encoded at it cannot be read; plan against the cluster or a copy of the live CRD with its status",
				strings.Join(removed, ", ")))
		}
	}

	// Objects, each by its kinds: every one found, listed or not (the tally).
	for i := range it.Objects.Findings {
		f := &it.Objects.Findings[i]
		f.Kinds = f.kinds()
	}
	t := it.tally()
	if kt := t.of(KindDataLoss); kt.count > 0 {
		n := int(kt.count)
		add(KindDataLoss, fmt.Sprintf("%s %s fields on read, and from etcd on the next write: %s (%s)", objectsCount(n), agree(n, "loses", "lose"), kt.pathList(), kt.nameList()))
	}
	if kt := t.of(KindRejectedWrite); kt.count > 0 {
		add(KindRejectedWrite, fmt.Sprintf("%s would be rejected on the next update (a controller's write): %s", objectsCount(int(kt.count)), kt.nameList()))
	}
	if kt := t.of(KindTypeMismatch); kt.count > 0 {
		n := int(kt.count)
		add(KindTypeMismatch, fmt.Sprintf("%s %s values whose type does not fit the typed schema of %s (%s): server-side apply fails on %s (the API server: failed to create typed live object …: %s), a rewrite cannot record %s field ownership (servers before 1.37 drop all of %s managedFields), and a re-create as read is rejected: %s",
			objectsCount(n), agree(n, "holds", "hold"), it.Objects.ReadVersion, kt.pathList(), agree(n, "it", "them"), kt.first, agree(n, "its", "their"), agree(n, "its", "their"), kt.nameList()))
	}
	if kt := t.of(KindOwnershipLoss); kt.count > 0 {
		n := int(kt.count)
		add(KindOwnershipLoss, fmt.Sprintf("the rewrite at %s drops every field manager of %s (kube-apiserver before 1.37 drops all managedFields of an object whose entries of another version it cannot convert: %s): %s; its preflight refuses unless the rewrite is given consent",
			it.StorageVersion.After, objectsCount(n), kt.first, kt.nameList()))
	}
	if kt := t.ownersUnknown; kt.count > 0 {
		add(KindUnknown, fmt.Sprintf("the rewrite at %s may drop every field manager of %s, which plan cannot tell (%s): %s; the preflight of the rewrite tells, before it writes",
			it.StorageVersion.After, objectsCount(int(kt.count)), kt.first, kt.nameList()))
	}
	if kt := t.of(KindInvalidOnRecreate); kt.count > 0 {
		n := int(kt.count)
		add(KindInvalidOnRecreate, fmt.Sprintf("%s %s the new schema: writes are accepted (the API server ratchets unchanged fields), but a re-create as listed (a restore, a GitOps replace) is rejected: %s",
			objectsCount(n), agree(n, "violates", "violate"), kt.nameList()))
	}
	if kt := t.of(KindUnknown); kt.count > 0 {
		n := int(kt.count)
		add(KindUnknown, fmt.Sprintf("%s %s fields on read if encoded at another version in etcd (a migration is pending; the API cannot show it): %s (%s)", objectsCount(n), agree(n, "loses", "lose"), kt.pathList(), kt.nameList()))
	}
	conversionReasons(it, add)

	// Field managers.
	for _, mv := range it.ManagedFields {
		gone := "no longer serves"
		if mv.RemovedByThisChange {
			gone = "removes"
			add(KindManagedFields, fmt.Sprintf("server-side apply fails on %s whose managedFields name %s, which the new CRD removes (and a plain update wipes their managedFields)", objectsCount(int(mv.Objects)), mv.Version))
		}
		if !mv.RemovedByThisChange && !mv.UnservedByThisChange {
			continue
		}
		for _, w := range mv.Writers {
			switch w.Role {
			case ownership.RoleApplier:
				add(KindManagedFields, fmt.Sprintf("%s still writes %s (%s, %s), which the new CRD %s: its next apply fails; %s", w.Manager, mv.Version, w.Operation, objectsCount(int(w.Objects)), gone, orEmpty(w.Advice, "change its manifests")))
			case ownership.RoleController:
				add(KindUnknown, fmt.Sprintf("%s last wrote %s (%s, %s), which the new CRD %s: if it still does, its writes fail; %s", w.Manager, mv.Version, w.Operation, objectsCount(int(w.Objects)), gone, orEmpty(w.Advice, "check which version it writes")))
			}
		}
	}

	// What was not evaluated.
	var risky []SchemaChange
	stricter := []SchemaChange{}
	for _, c := range it.SchemaChanges {
		if c.Effect == EffectLossy || c.Effect == EffectStricter {
			risky = append(risky, c)
			stricter = append(stricter, c)
		}
	}
	gone := len(it.Versions.Removed) > 0 || len(it.Versions.Unserved) > 0
	if live != nil && !it.allEvaluated && (len(risky) > 0 || gone) {
		what := []string{}
		if len(risky) > 0 {
			what = append(what, fmt.Sprintf("%s (removed fields, stricter rules) may break them", plural(len(risky), "schema change")))
		}
		if gone {
			what = append(what, "their managedFields may name a version that disappears")
		}
		switch {
		case it.Objects.Evaluated == 0:
			add(KindUnknown, "the objects were not evaluated: "+strings.Join(what, "; "))
		default:
			add(KindUnknown, fmt.Sprintf("only %d of %s objects were evaluated: for the others, %s", it.Objects.Evaluated, totalText(it.Objects.Total), strings.Join(what, "; ")))
		}
	}
	if len(stricter) > 0 {
		add(KindStricter, "")
	}

	it.BreakingReasons, it.UnknownReasons, it.InvalidOnRecreateReasons, it.Stricter = []string{}, []string{}, []string{}, stricter
	it.Kinds, it.Verdict = []Kind{}, VerdictSafe
	for _, d := range decisions {
		rs, ok := reasons[d.Kind]
		if !ok {
			continue
		}
		it.Kinds = append(it.Kinds, d.Kind)
		it.Verdict = Worse(it.Verdict, d.Verdict)
		switch d.Verdict {
		case VerdictBreaking:
			it.BreakingReasons = append(it.BreakingReasons, rs...)
		case VerdictUnknown:
			it.UnknownReasons = append(it.UnknownReasons, rs...)
		case VerdictInvalidOnRecreate:
			it.InvalidOnRecreateReasons = append(it.InvalidOnRecreateReasons, rs...)
		}
	}
	it.Breaking = it.Verdict == VerdictBreaking || it.Verdict == VerdictUnknown
}

// addKind records kind k on the item (once, in the decision table's order).
func (it *Item) addKind(k Kind) {
	if slices.Contains(it.Kinds, k) {
		return
	}
	var out []Kind
	for _, d := range decisions {
		if d.Kind == k || slices.Contains(it.Kinds, d.Kind) {
			out = append(out, d.Kind)
		}
	}
	it.Kinds = out
}

func objectName(f *Finding) string {
	if f.Namespace != "" {
		return f.Namespace + "/" + f.Name
	}
	return f.Name
}

// namesShown is how many object names a reason lists.
const namesShown = 3

func names(ns []string) string {
	if len(ns) <= namesShown {
		return strings.Join(ns, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ns[:namesShown], ", "), len(ns)-namesShown)
}

// nameList names the kind's first objects, and how many more there are.
func (kt kindTally) nameList() string {
	if kt.count <= int64(len(kt.names)) {
		return strings.Join(kt.names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(kt.names, ", "), kt.count-int64(len(kt.names)))
}

// pathList lists the kind's paths.
func (kt kindTally) pathList() string {
	if kt.more {
		return strings.Join(kt.paths, ", ") + ", …"
	}
	return strings.Join(kt.paths, ", ")
}

func union(a, b []string) []string {
	for _, s := range b {
		if !slices.Contains(a, s) {
			a = append(a, s)
		}
	}
	return a
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func agree(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func objectsCount(n int) string { return plural(n, "object") }

func totalText(n int64) string {
	if n < 0 {
		return "an unknown number of"
	}
	return fmt.Sprint(n)
}
