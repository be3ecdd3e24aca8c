package plan

import (
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/retire"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// Runbook phases, in the order the steps come.
const (
	PhaseFix     = "fix"
	PhaseBackup  = "backup"
	PhaseStorage = "storage"
	PhaseApply   = "apply"
	PhaseVerify  = "verify"
)

// Runbook actions: what a step does (kubectl crdver upgrade carries out each by its action).
const (
	// ActionFixObjects: objects whose next write would be rejected; edit them first.
	ActionFixObjects = "fix-objects"
	// ActionFixRecreate: objects invalid on re-create (their writes are accepted, a re-create is
	// rejected): a person fixes them, before or after the apply.
	ActionFixRecreate = "fix-invalid-on-recreate"
	// ActionFixValues: objects holding values whose type does not fit the new storage version's
	// schema (server-side apply fails on them): a person changes each value, with the commands
	// given where it converts without loss.
	ActionFixValues = "fix-values"
	// ActionConvertObjects: objects that lose fields when re-encoded at the new storage version.
	ActionConvertObjects = "convert-objects"
	// ActionChangeWriters: field managers that write a version the release removes or unserves.
	ActionChangeWriters = "change-writers"
	// ActionFixCRDs: the API server would reject the new CRDs for another reason.
	ActionFixCRDs = "fix-crds"
	// ActionBackup: read every stored version that holds data.
	ActionBackup = "backup"
	// ActionIntermediate: apply the new CRDs with the removed versions kept (served), so the
	// new storage version exists before the objects are rewritten.
	ActionIntermediate = "intermediate-crds"
	// ActionMigrate: storage switch (Target), rewrite, trim (kubectl crdver migrate).
	ActionMigrate = "migrate"
	// ActionRetire: storage switch, rewrite, trim and managedFields moved off Version
	// (kubectl crdver retire).
	ActionRetire = "retire"
	// ActionApply: one server-side apply of the whole release.
	ActionApply = "apply"
	// ActionToolApply: a deployment tool manages the CRDs: it applies them.
	ActionToolApply = "tool-apply"
	// ActionVerify: plan of the same release is clean; versions.
	ActionVerify = "verify"
)

// RunbookStep is one step of the release runbook.
type RunbookStep struct {
	Phase  string `json:"phase"`
	Action string `json:"action"`
	// CRDs the step concerns (empty: the whole release).
	CRDs []string `json:"crds,omitempty"`
	// Version is the version the step moves off (retire), Target the one it moves to.
	Version string `json:"version,omitempty"`
	Target  string `json:"target,omitempty"`
	// Commands to run, in order; empty when the step is for a person (Why says what to do).
	Commands []string `json:"commands"`
	// Resources a backup reads, as plural.version.group (each version that holds data).
	Resources []string `json:"resources,omitempty"`
	// Objects the step concerns (namespace/name), with what is wrong, when it is about objects.
	Objects []string `json:"objects,omitempty"`
	// Why the step is needed and what it does.
	Why string `json:"why"`
	// Remove: a retire step also removes Version from spec.versions (retire --remove).
	Remove bool `json:"remove,omitempty"`
	// Manual: no command of ours or kubectl's does it for you.
	Manual bool `json:"manual,omitempty"`
}

// RunbookOptions tune the runbook's commands.
type RunbookOptions struct {
	// ApplyFile names the new CRDs as given to -f ("" is NEW-CRDS.yaml; several are joined
	// with " -f ").
	ApplyFile string
	// BackupFile is where the backup command writes ("" is crdver-backup.yaml).
	BackupFile string
	// GitOps are the GitOps sources of the cluster (FindGitOpsSources): the change-writers
	// step converts the manifests of those that apply objects of its CRD.
	GitOps []GitOpsSource
}

// objectsShown caps the objects a step lists (the plan's findings list them all).
const objectsShown = 20

// FieldManager is the field manager of the release's server-side apply: kubectl's own, so the
// next `kubectl apply --server-side` of the release does not conflict with it.
const FieldManager = "kubectl"

// oneTimeManagers are field managers of one-off kubectl writes: they do not write again, so
// nothing needs changing when the version they wrote goes away (retire moves their entries).
var oneTimeManagers = []string{"kubectl-create", "kubectl-edit", "kubectl-label", "kubectl-annotate", "kubectl-patch", "kubectl-replace", "kubectl-scale", "kubectl-set", "kubectl-crdver", "before-first-apply"}

// crdPlan is what the runbook needs to know about one CRD.
type crdPlan struct {
	it            *Item
	live, next    *apiextensionsv1.CustomResourceDefinition
	storage       string         // the new storage version
	removedStored []string       // removed versions still in the live status.storedVersions
	removedNamed  []string       // the other removed versions (not stored; maybe named by managedFields)
	managedBy     retire.Manager // the deployment tool managing the live CRD (zero when none)
	unservedNamed []string       // versions the release stops serving that managedFields name
	serveAgain    bool           // a version to retire is not served by the live CRD
	migrate       bool           // the storage switches or storedVersions lists other versions
	intermediate  bool           // the live CRD lacks a served new storage version
	blocked       bool           // the apply is rejected for a reason the steps do not remove
}

func analyse(it *Item) *crdPlan {
	p := &crdPlan{it: it, live: it.live, next: it.next, storage: it.StorageVersion.After}
	if p.live == nil {
		p.blocked = !it.Apply.Allowed
		return p
	}
	for _, v := range it.Versions.Removed {
		if slices.Contains(p.live.Status.StoredVersions, v) {
			p.removedStored = append(p.removedStored, v)
		}
	}
	// Every other version the release removes: retire --remove takes it out before the apply
	// (a server-side apply does not delete list entries another field manager owns).
	for _, v := range it.Versions.Removed {
		if !slices.Contains(p.removedStored, v) {
			p.removedNamed = append(p.removedNamed, v)
		}
	}
	p.managedBy = retire.ManagedBy(p.live)
	named := map[string]bool{}
	for _, mv := range it.ManagedFields {
		named[mv.Version] = true
		if mv.UnservedByThisChange {
			p.unservedNamed = append(p.unservedNamed, mv.Version)
		}
	}
	p.migrate = it.StorageVersion.Before != p.storage || len(p.removedStored) > 0
	for _, v := range p.live.Status.StoredVersions {
		p.migrate = p.migrate || v != p.storage
	}
	// retire converts managedFields entries through a read at the version: it must be served
	// while they are moved (cert-manager 1.7 removes v1alpha2, which 1.6 already unserved).
	// A version the serve-stored step serves again before is served by then: no intermediate
	// CRD is needed for it (and once it is served, --intermediate-crds has none to print).
	var servedBefore []string
	if p.servesStored() {
		servedBefore = UnservedStored(p.live)
	}
	for _, v := range p.retired() {
		if lv, err := crdinfo.Lookup(p.live, v); err == nil && !lv.Served && (named[v] || slices.Contains(p.removedStored, v)) && !slices.Contains(servedBefore, v) {
			p.serveAgain = true
		}
	}
	if p.migrate || len(p.removedNamed) > 0 || len(p.unservedNamed) > 0 {
		v, err := crdinfo.Lookup(p.live, p.storage)
		p.intermediate = err != nil || !v.Served || p.serveAgain
	}
	p.blocked = !it.Apply.Allowed && len(p.removedStored) == 0
	return p
}

// retired are the versions whose managedFields entries retire moves before the apply.
func (p *crdPlan) retired() []string {
	return append(append(append([]string{}, p.removedStored...), p.removedNamed...), p.unservedNamed...)
}

// Intermediate is the CRD to apply before the objects are rewritten when the live CRD lacks
// the new storage version: next with every version the release removes but the live CRD still
// stores or names in managedFields kept (as live has it, served, not storage), so that the
// storage switch happens with the old data still readable and retire can move managedFields.
// It is nil when next can be used as it is (nothing to keep).
func Intermediate(live, next *apiextensionsv1.CustomResourceDefinition, keep []string) *apiextensionsv1.CustomResourceDefinition {
	out := next.DeepCopy()
	out.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	out.ResourceVersion, out.UID, out.Generation, out.ManagedFields, out.CreationTimestamp = "", "", 0, nil, metav1.Time{}
	for _, n := range keep {
		if _, err := crdinfo.Lookup(out, n); err == nil {
			for i := range out.Spec.Versions {
				if out.Spec.Versions[i].Name == n {
					out.Spec.Versions[i].Served = true // served until retire has moved its entries
				}
			}
			continue
		}
		v, err := crdinfo.Lookup(live, n)
		if err != nil {
			continue
		}
		kept := *v.DeepCopy()
		kept.Served, kept.Storage = true, false
		out.Spec.Versions = append(out.Spec.Versions, kept)
	}
	return out
}

// IntermediateFor is the intermediate CRD of a planned item (nil when none is needed).
func IntermediateFor(it *Item) *apiextensionsv1.CustomResourceDefinition {
	p := analyse(it)
	if !p.intermediate || p.live == nil {
		return nil
	}
	return Intermediate(p.live, p.next, p.retired())
}

// Runbook is the ordered runbook of a whole release: fix and convert objects → back up every
// stored version that holds data → per CRD: storage switch (through an intermediate CRD when
// the live one lacks the new storage version), rewrite, trim, managedFields moved → one
// server-side apply of the release (or the deployment tool's) → verify. Nothing it runs leaves
// a CRD half-done: objects whose next write would be rejected are fixed before any storage
// switch, and the release is applied once, after every CRD is ready for it.
func Runbook(items []Item, o RunbookOptions) []RunbookStep {
	b := newRunbook(items, o)
	b.webhook()
	b.fix()
	b.fixCRDs()
	b.backup()
	if len(b.blocked) > 0 {
		return b.steps // nothing is written while the release cannot be applied
	}
	b.intermediate()
	b.storage()
	b.apply()
	b.verify()
	return b.steps
}

// runbook is a release runbook being written, phase by phase.
type runbook struct {
	file, backupFile string
	opts             RunbookOptions
	plans            []*crdPlan
	steps            []RunbookStep
	// blocked: CRDs the API server would reject (fixCRDs); nothing is written while any is.
	blocked []string
	// backedUp: CRDs the backup step reads at every stored version (backup).
	backedUp map[string]bool
	// inter: CRDs applied first as intermediate CRDs (intermediate).
	inter []string
}

func newRunbook(items []Item, o RunbookOptions) *runbook {
	b := &runbook{file: o.ApplyFile, backupFile: o.BackupFile, opts: o, backedUp: map[string]bool{}}
	if b.file == "" {
		b.file = "NEW-CRDS.yaml"
	}
	if b.backupFile == "" {
		b.backupFile = "crdver-backup.yaml"
	}
	for i := range items {
		b.plans = append(b.plans, analyse(&items[i]))
	}
	return b
}

func (b *runbook) add(s RunbookStep) {
	if s.Commands == nil {
		s.Commands = []string{}
	}
	b.steps = append(b.steps, s)
}

// fix adds, per CRD, the steps before any write: objects whose no-op update is rejected,
// objects losing fields, values of the wrong type, objects invalid on re-create, writers of
// versions that go away.
func (b *runbook) fix() {
	for _, p := range b.plans {
		if p.live == nil {
			continue
		}
		readAt := ListVersion(p.live)
		resource := p.live.Spec.Names.Plural + "." + readAt + "." + p.live.Spec.Group
		var rejected, losing []string
		var rejectedCmds, losingCmds []string
		// Each object by its kinds (the decision table: a rejected write → fix-objects; data
		// loss, known or depending on the encoding → convert-objects).
		for _, f := range p.it.Objects.Findings {
			edit := editCommand(resource, f)
			kinds := f.kinds()
			if slices.Contains(kinds, KindRejectedWrite) {
				rejected = append(rejected, objectName(&f)+": "+strings.Join(f.UpdateErrors, "; "))
				rejectedCmds = append(rejectedCmds, edit)
			}
			if slices.Contains(kinds, KindDataLoss) || slices.Contains(kinds, KindUnknown) {
				lost := append(append([]string{}, f.PrunedOnRead...), f.PossiblyPrunedOnRead...)
				losing = append(losing, objectName(&f)+": "+strings.Join(lost, ", "))
				losingCmds = append(losingCmds, edit)
			}
		}
		if len(rejected) > 0 {
			b.add(RunbookStep{Phase: PhaseFix, Action: ActionFixObjects, CRDs: []string{p.next.Name}, Manual: DecisionFor(KindRejectedWrite).Manual,
				Objects: capList(rejected), Commands: capList(rejectedCmds),
				Why: fmt.Sprintf("%s of %s would be rejected on their next write under the new CRD: fix them before any storage switch, or the rewrite fails on them and leaves %s half-migrated", objects(len(rejected)), p.next.Name, p.next.Name)})
		}
		if len(losing) > 0 {
			b.add(RunbookStep{Phase: PhaseFix, Action: ActionConvertObjects, CRDs: []string{p.next.Name}, Manual: DecisionFor(KindDataLoss).Manual,
				Objects: capList(losing), Commands: capList(losingCmds),
				Why: fmt.Sprintf("fields the new version %[3]s lacks are held by %[1]s of %[2]s: rewriting at %[3]s drops them from etcd. Move the data to the fields %[3]s has (the release's own migration guide says how), or accept the loss: kubectl crdver upgrade refuses unless --allow-data-loss; the backup below keeps it", objects(len(losing)), p.next.Name, p.storage)})
		}
		if st, ok := valuesStep(p, b.file); ok {
			b.add(st)
		}
		if st, ok := recreateStep(p); ok {
			b.add(st)
		}
		if w := writersToChange(p); w != "" {
			b.add(b.changeWritersStep(p, w))
		}
	}
}

// fixCRDs adds a step per CRD the API server would reject for a reason the steps do not remove.
func (b *runbook) fixCRDs() {
	for _, p := range b.plans {
		if p.blocked {
			b.blocked = append(b.blocked, p.next.Name)
			b.add(RunbookStep{Phase: PhaseFix, Action: ActionFixCRDs, CRDs: []string{p.next.Name}, Manual: DecisionFor(KindApplyRejected).Manual,
				Why: fmt.Sprintf("the API server would reject %s as it is in %s: %s", p.next.Name, b.file, strings.Join(p.it.Apply.Errors, "; "))})
		}
	}
}

// backup adds the backup: every version in status.storedVersions, read at that version (never
// at the preferred version, which may already prune the fields at risk); before it, the step
// that serves stored versions the live CRD does not serve.
func (b *runbook) backup() {
	var resources, unreadable []string
	var backupCRDs []string
	for _, p := range b.plans {
		if p.live == nil || p.it.Objects.Total == 0 {
			continue
		}
		if !p.migrate && len(p.it.Objects.Findings) == 0 && len(p.removedNamed) == 0 && len(p.unservedNamed) == 0 {
			continue
		}
		backupCRDs = append(backupCRDs, p.live.Name)
		b.backedUp[p.live.Name] = true
		for _, v := range storedVersionsOf(p.live) {
			if lv, err := crdinfo.Lookup(p.live, v); err != nil || !lv.Served && !p.servesStored() { // servesStored: see serve-stored
				unreadable = append(unreadable, p.live.Name+" "+v+map[bool]string{true: " (not in spec.versions)"}[err != nil])
				b.backedUp[p.live.Name] = false
				continue
			}
			resources = append(resources, p.live.Spec.Names.Plural+"."+v+"."+p.live.Spec.Group)
		}
	}
	if len(resources) == 0 {
		clear(b.backedUp)
	}
	if s := serveStoredStep(b.plans); s != nil {
		b.add(*s)
	}
	if len(resources) > 0 {
		why := "a copy of every object at every version that holds its data (a read at the preferred version may already drop fields the new storage version lacks)"
		if len(unreadable) > 0 {
			why += fmt.Sprintf("; not served, so not readable as stored: %s", strings.Join(unreadable, ", "))
		}
		b.add(RunbookStep{Phase: PhaseBackup, Action: ActionBackup, CRDs: backupCRDs, Why: why, Resources: resources,
			Commands: []string{fmt.Sprintf("kubectl get %s -A -o yaml > %s", strings.Join(resources, ","), b.backupFile)}})
	}
}

// intermediate adds the intermediate CRDs, where the live ones lack the new storage version.
func (b *runbook) intermediate() {
	for _, p := range b.plans {
		if p.intermediate && p.live != nil {
			b.inter = append(b.inter, p.next.Name)
		}
	}
	if len(b.inter) > 0 {
		b.add(RunbookStep{Phase: PhaseStorage, Action: ActionIntermediate, CRDs: b.inter,
			Commands: []string{
				fmt.Sprintf("kubectl crdver upgrade -f %s --intermediate-crds > crdver-intermediate.yaml", b.file),
				"kubectl apply --server-side --force-conflicts -f crdver-intermediate.yaml",
			},
			Why: fmt.Sprintf("the live CRDs %s lack their new storage version or do not serve a version whose entries must be moved: first apply the new CRDs with the versions they remove or unserve kept (served), so the objects can be rewritten at the new storage version and their managedFields moved while the old versions are still readable", strings.Join(b.inter, ", "))})
	}
}

// storage adds, per CRD, the rewrite at the new storage version (retire moves managedFields too).
func (b *runbook) storage() {
	for _, p := range b.plans {
		if p.live == nil {
			continue
		}
		name, s := p.next.Name, p.storage
		flag, consentWhy := p.consent(b.backedUp[p.live.Name], b.backupFile)
		for i, v := range p.removedStored {
			why := fmt.Sprintf("move %s's managedFields entries of %s to %s (server-side apply fails on objects that keep them once %s is gone)", name, v, s, v)
			if i == 0 {
				why = fmt.Sprintf("make %s the storage version of %s, rewrite every object at it, trim status.storedVersions to [%s] and move managedFields entries of %s to %s: the release removes %s", s, name, s, v, s, v)
			}
			b.add(RunbookStep{Phase: PhaseStorage, Action: ActionRetire, CRDs: []string{name}, Version: v, Target: s, Why: why + p.removeWhy(v) + consentWhy, Remove: p.Remove(),
				Commands: []string{p.retireCommand(v) + flag}})
		}
		if len(p.removedStored) == 0 && p.migrate {
			cmd := fmt.Sprintf("kubectl crdver migrate %s", name)
			if !p.intermediate && p.it.StorageVersion.Before != s {
				cmd += " --to " + s
			}
			b.add(RunbookStep{Phase: PhaseStorage, Action: ActionMigrate, CRDs: []string{name}, Target: s, Commands: []string{cmd + flag},
				Why: fmt.Sprintf("make %s the storage version of %s, rewrite every object at it and trim status.storedVersions to [%s]", s, name, s) + consentWhy})
		}
		for _, v := range p.unservedNamed {
			b.add(RunbookStep{Phase: PhaseStorage, Action: ActionRetire, CRDs: []string{name}, Version: v, Target: s,
				Commands: []string{fmt.Sprintf("kubectl crdver retire %s %s --to %s", name, v, s) + flag},
				Why:      fmt.Sprintf("move %s's managedFields entries of %s to %s while %s is served: the release stops serving it, after which server-side apply of those objects fails", name, v, s, v) + consentWhy})
		}
		for _, v := range p.removedNamed {
			b.add(RunbookStep{Phase: PhaseStorage, Action: ActionRetire, CRDs: []string{name}, Version: v, Target: s, Remove: p.Remove(),
				Commands: []string{p.retireCommand(v) + flag},
				Why:      fmt.Sprintf("move any managedFields entries of %s in %s to %s (the release removes %s, after which server-side apply fails on objects keeping them)%s", v, name, s, v, p.removeWhy(v)) + consentWhy})
		}
		b.pointConvertToConsent(name, flag)
	}
}

// pointConvertToConsent: the convert-objects step of the CRD points to the storage commands
// that carry the consent flag.
func (b *runbook) pointConvertToConsent(name, flag string) {
	if flag == "" || !slices.ContainsFunc(b.steps, func(st RunbookStep) bool {
		return st.Phase == PhaseStorage && slices.Contains(st.CRDs, name) && slices.ContainsFunc(st.Commands, func(c string) bool { return strings.HasSuffix(c, flag) })
	}) {
		return
	}
	for i := range b.steps {
		if b.steps[i].Action == ActionConvertObjects && slices.Equal(b.steps[i].CRDs, []string{name}) {
			b.steps[i].Why += fmt.Sprintf(", and the storage steps below say%s for that (leave it out if you moved the data)", flag)
		}
	}
}

// apply adds the one apply of the release: ours, or the deployment tool's that manages the CRDs.
func (b *runbook) apply() {
	var tools, rendered []string
	for _, p := range b.plans {
		if p.live == nil {
			continue
		}
		if by := p.managedBy.String(); by != "" && !slices.Contains(tools, by) {
			tools = append(tools, by)
		}
		if retire.HelmLabelOnly(p.live) {
			rendered = append(rendered, p.live.Name)
		}
	}
	if len(tools) > 0 {
		b.add(RunbookStep{Phase: PhaseApply, Action: ActionToolApply, Manual: true,
			Why: fmt.Sprintf("let %s apply the new CRDs (upgrade the release there): the CRDs are managed by it, and an apply of ours would be undone or fought on its next sync", strings.Join(tools, ", "))})
		return
	}
	why := "one server-side apply of the whole release, after every CRD is ready for it"
	if len(b.inter) > 0 || slices.ContainsFunc(b.steps, func(s RunbookStep) bool { return s.Action == ActionMigrate || s.Action == ActionRetire }) {
		why += "; --force-conflicts because the steps above changed .spec.versions as field manager kubectl-crdver, and without it the apply conflicts on those fields"
	} else {
		why += "; --force-conflicts takes over fields another manager set (e.g. an earlier storage switch by kubectl-crdver)"
	}
	if len(rendered) > 0 {
		why += fmt.Sprintf("; no Helm release owns %s: its label app.kubernetes.io/managed-by=Helm comes from a helm template render, without the release annotations meta.helm.sh/release-name and meta.helm.sh/release-namespace Helm requires", strings.Join(rendered, ", "))
	}
	b.add(RunbookStep{Phase: PhaseApply, Action: ActionApply, Why: why,
		Commands: []string{fmt.Sprintf("kubectl apply --server-side --force-conflicts -f %s", b.file)}})
}

// verify adds the last step: plan of the same release is clean, storedVersions trimmed.
func (b *runbook) verify() {
	b.add(RunbookStep{Phase: PhaseVerify, Action: ActionVerify,
		Why: "plan of the same release exits 0 (nothing breaking, unknown or invalid on re-create: the fix steps above done), and every CRD's status.storedVersions is its storage version only",
		Commands: []string{
			fmt.Sprintf("kubectl crdver plan -f %s", b.file),
			"kubectl crdver versions --all",
		}})
}

// consent is the consent the CRD's retire and migrate commands carry (decision table:
// Decision.Consent) and what the step then says: where its objects lose fields (a data-loss
// finding, a loss that depends on the version an object is encoded at, or data stored at a
// version the live CRD does not serve, which the plan cannot read), the commands say
// --allow-data-loss, so that a user who accepts the loss has a runnable command. Only when
// the backup step above reads the CRD at every stored version (backedUp): otherwise nothing
// keeps what is dropped, and the commands carry no consent (they refuse, naming the loss).
func (p *crdPlan) consent(backedUp bool, backupFile string) (flag, why string) {
	if !backedUp || slices.Contains(p.it.Kinds, KindConversionWebhook) || p.it.ConversionCheck != nil && p.it.ConversionCheck.State == webhookcheck.StateNotAsked {
		return "", "" // no consent to what nobody could measure: the conversion was not asked, or cannot convert
	}
	var what string
	var lossy []string
	for _, f := range p.it.Objects.Findings {
		ks := f.kinds()
		if slices.Contains(ks, KindDataLoss) || slices.Contains(ks, KindUnknown) {
			lossy = append(lossy, objectName(&f))
		}
	}
	var kind Kind
	switch {
	case len(lossy) > 0:
		kind = KindDataLoss
		what = fmt.Sprintf("it drops from etcd the fields the convert-objects step above lists (%s of %s) unless you moved their data", objects(len(lossy)), p.next.Name)
	case slices.Contains(p.it.Kinds, KindDataLoss):
		kind = KindDataLoss
		what = fmt.Sprintf("objects of %s lose what the conversion to %s fails to keep (the plan's findings say which checks fail)", p.next.Name, p.storage)
	case len(p.unreadStored()) > 0:
		kind = KindUnknown
		what = fmt.Sprintf("objects of %s may still be encoded at %s in etcd, which the plan cannot read as stored (not served, or converted by the live CRD's conversion webhook): whatever fields of theirs %s lacks are dropped (the command's own preflight lists them before it writes)", p.next.Name, strings.Join(p.unreadStored(), ", "), p.storage)
	default:
		return "", ""
	}
	d := DecisionFor(kind)
	if d.Consent == "" {
		return "", ""
	}
	return " --" + d.Consent, fmt.Sprintf(". --%s is your consent to the loss: %s; the backup step above keeps them, and kubectl crdver restore -f %s puts them back once a release whose CRDs hold them is applied again. Leave --%s out if nothing is to be lost: the command then refuses, listing any loss, before it writes", d.Consent, what, backupFile, d.Consent)
}

// unreadStored are the versions in the live status.storedVersions, other than the new storage
// version, whose copies in etcd the plan could not read as stored: versions the live CRD does
// not serve, or any, when the live CRD converts through a webhook (objects.go notes that plan
// cannot tell what those copies hold). Only when objects are rewritten (p.migrate).
func (p *crdPlan) unreadStored() []string {
	if p.live == nil || !p.migrate || p.it.Objects.Total == 0 {
		return nil
	}
	webhook := p.live.Spec.Conversion != nil && p.live.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter
	var out []string
	for _, v := range storedVersionsOf(p.live) {
		if v == p.storage || v == ListVersion(p.live) && p.it.ConversionCheck != nil && p.it.ConversionCheck.RoundTrip != nil {
			continue // listed there, read as stored, and round-tripped through the new conversion
		}
		if lv, err := crdinfo.Lookup(p.live, v); webhook || err != nil || !lv.Served {
			out = append(out, v)
		}
	}
	return out
}

// valuesStep is the step for a person about the CRD's objects holding values whose type does
// not fit the new storage version's typed schema (decision table: KindTypeMismatch): each
// object, field, the value's type and the expected one; for the values that convert without
// loss, what each becomes and a JSON patch that changes it only if it is still the value
// listed (a test operation first); for the others, the commands to look at and edit the object.
func valuesStep(p *crdPlan, file string) (RunbookStep, bool) {
	v := p.it.Objects.ReadVersion
	if v == "" {
		v = p.storage
	}
	resource := p.next.Spec.Names.Plural + "." + v + "." + p.next.Spec.Group
	var objs, cmds []string
	var patched, edited int
	for _, f := range p.it.Objects.Findings {
		if len(f.TypeMismatches) == 0 {
			continue
		}
		var what []string
		var ops []string
		convertible := true
		for _, m := range f.TypeMismatches {
			line := fmt.Sprintf("%s is %s, %s expects %s", m.Path, orEmpty(m.ValueType, "a value"), v, orEmpty(m.Expected, "another type"))
			ptr, ok := jsonPointer(m.Path)
			if m.Converted == "" || !ok || m.Value == "" {
				convertible = false
				what = append(what, line+" (no lossless conversion: for you to decide)")
				continue
			}
			what = append(what, line+" → "+m.Converted)
			ops = append(ops, fmt.Sprintf(`{"op":"test","path":%q,"value":%s}`, ptr, m.Value), fmt.Sprintf(`{"op":"replace","path":%q,"value":%s}`, ptr, m.Converted))
		}
		objs = append(objs, objectName(&f)+": "+strings.Join(what, "; "))
		if convertible {
			patched++
			cmds = append(cmds, patchCommand(resource, f, "["+strings.Join(ops, ",")+"]"))
		} else {
			edited++
			cmds = append(cmds, getCommand(resource, f), editCommand(resource, f))
		}
	}
	if len(objs) == 0 {
		return RunbookStep{}, false
	}
	var when string
	if lv, err := crdinfo.Lookup(p.live, v); err == nil && lv.Served && equalSchemas(p.live, p.next, v) {
		when = "before or after the apply"
	} else {
		when = fmt.Sprintf("as soon as the cluster serves %s with this schema (the intermediate CRDs of the storage steps below, else the apply), before the objects are rewritten (the live CRD does not serve it yet)", v)
	}
	how := ""
	switch {
	case patched > 0 && edited > 0:
		how = fmt.Sprintf("the patches below change the %d that convert without loss (each only if the value is still the one listed); edit the other %d", patched, edited)
	case patched > 0:
		how = "the patches below change each value to what is listed (each only if the value is still the one listed)"
	default:
		how = "no value converts without loss: edit each"
	}
	why := fmt.Sprintf("%s of %s %s values whose type does not fit the typed schema of %s, as listed: the API server accepts %s no-op writes (it ratchets unchanged fields), but server-side apply fails on %s, a rewrite cannot record %s field ownership (servers before 1.37 drop all of %s managedFields) and a re-create as read is rejected. Change the values %s: %s; then kubectl crdver plan -f %s no longer lists %s. Server-side apply works again once the objects' managedFields entries of other versions are moved to %s (the migrate and retire steps do it within their rewrite): an entry of a version whose schema the new value does not fit fails it too",
		objects(len(objs)), p.next.Name, agree(len(objs), "holds", "hold"), v, agree(len(objs), "its", "their"), agree(len(objs), "it", "them"), agree(len(objs), "its", "their"), agree(len(objs), "its", "their"), when, how, file, agree(len(objs), "it", "them"), v)
	if len(cmds) > 2*objectsShown {
		cmds = append(cmds[:2*objectsShown:2*objectsShown], fmt.Sprintf("… and %d more (kubectl crdver plan -o json lists them all)", len(objs)-objectsShown))
	}
	return RunbookStep{Phase: PhaseFix, Action: ActionFixValues, CRDs: []string{p.next.Name}, Target: v, Manual: DecisionFor(KindTypeMismatch).Manual,
		Objects: capList(objs), Commands: cmds, Why: why}, true
}

// equalSchemas reports whether version v has the same schema in a and b.
func equalSchemas(a, b *apiextensionsv1.CustomResourceDefinition, v string) bool {
	av, err1 := crdinfo.Lookup(a, v)
	bv, err2 := crdinfo.Lookup(b, v)
	return err1 == nil && err2 == nil && equality.Semantic.DeepEqual(av.Schema, bv.Schema)
}

// jsonPointer turns a structured-merge-diff path (.spec.config, .spec.items[0].x) into a JSON
// pointer (/spec/config); false for a path it cannot address (an element of a list by key).
func jsonPointer(path string) (string, bool) {
	var b strings.Builder
	for path != "" {
		switch path[0] {
		case '.':
			path = path[1:]
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(path[:end], "~", "~0"), "/", "~1"))
			path = path[end:]
		case '[':
			end := strings.Index(path, "]")
			idx := path[1:max(end, 1)]
			if end < 0 || strings.ContainsAny(idx, "=") {
				return "", false
			}
			b.WriteString("/" + idx)
			path = path[end+1:]
		default:
			return "", false
		}
	}
	return b.String(), b.Len() > 0
}

func patchCommand(resource string, f Finding, patch string) string {
	ns := ""
	if f.Namespace != "" {
		ns = " -n " + f.Namespace
	}
	return fmt.Sprintf("kubectl patch %s %s%s --type=json -p '%s'", resource, f.Name, ns, strings.ReplaceAll(patch, "'", `'\''`))
}

// recreateStep is the step for a person about the CRD's objects that are invalid on re-create
// (decision table: KindInvalidOnRecreate): which objects, the API server's errors, and the
// commands to look at and edit each, in a version that works before and after the apply when
// there is one.
func recreateStep(p *crdPlan) (RunbookStep, bool) {
	var objs, cmds []string
	v, both := fixVersion(p)
	// An object judged as the new storage version holds it is fixed there: an edit at another
	// version may not reach what that version requires (Cluster API's v1beta1 has no field
	// that becomes v1beta2's spec.controlPlane.templateRef).
	if read := p.it.Objects.ReadVersion; read != "" && slices.ContainsFunc(p.it.Objects.Findings, func(f Finding) bool {
		return len(f.CreateErrorsAfterLoss) > 0 && slices.Contains(f.kinds(), KindInvalidOnRecreate)
	}) {
		lv, err := crdinfo.Lookup(p.live, read)
		v, both = read, err == nil && lv.Served
	}
	resource := p.next.Spec.Names.Plural + "." + v + "." + p.next.Spec.Group
	for _, f := range p.it.Objects.Findings {
		if !slices.Contains(f.kinds(), KindInvalidOnRecreate) {
			continue
		}
		name := objectName(&f)
		switch {
		case len(f.CreateErrorsAfterLoss) > 0 && len(f.PrunedOnRead)+len(f.PossiblyPrunedOnRead) > 0:
			name += " (once the fields it loses are gone)"
		case len(f.CreateErrorsAfterLoss) > 0:
			name += fmt.Sprintf(" (as %s holds it)", p.it.Objects.ReadVersion)
		}
		objs = append(objs, name+": "+strings.Join(f.RecreateErrors(), "; "))
		cmds = append(cmds, getCommand(resource, f), editCommand(resource, f))
	}
	if len(objs) == 0 {
		return RunbookStep{}, false
	}
	when := "before or after the apply"
	if !both {
		when = fmt.Sprintf("after the apply (the live CRD does not serve %s yet)", v)
	}
	why := fmt.Sprintf("%s of %s %s the new schema of %s: the API server accepts %s writes (it ratchets fields that do not change), so the upgrade goes on, but re-creating %s as %s (a restore, a GitOps replace) is rejected with the errors below. Edit each so that it is valid, %s; the verify step passes once none is left",
		objects(len(objs)), p.next.Name, agree(len(objs), "violates", "violate"), v, agree(len(objs), "its", "their"), agree(len(objs), "it", "them"), agree(len(objs), "it is", "they are"), when)
	if len(cmds) > 2*objectsShown {
		cmds = append(cmds[:2*objectsShown:2*objectsShown], fmt.Sprintf("… and %d more (kubectl crdver plan -o json lists them all)", len(objs)-objectsShown))
	}
	return RunbookStep{Phase: PhaseFix, Action: ActionFixRecreate, CRDs: []string{p.next.Name}, Target: v, Manual: DecisionFor(KindInvalidOnRecreate).Manual,
		Objects: capList(objs), Commands: cmds, Why: why}, true
}

// fixVersion is the version to look at and edit objects in: one the live and the new CRD both
// serve (the new storage version first), so the commands work before and after the apply
// (both); else the new storage version, for after the apply.
func fixVersion(p *crdPlan) (string, bool) {
	for _, v := range append([]string{p.storage}, crdinfo.VersionNames(p.next)...) {
		lv, err := crdinfo.Lookup(p.live, v)
		if err != nil || !lv.Served {
			continue
		}
		if nv, err := crdinfo.Lookup(p.next, v); err == nil && nv.Served {
			return v, true
		}
	}
	return p.storage, false
}

func getCommand(resource string, f Finding) string {
	if f.Namespace == "" {
		return fmt.Sprintf("kubectl get %s %s -o yaml", resource, f.Name)
	}
	return fmt.Sprintf("kubectl get %s %s -n %s -o yaml", resource, f.Name, f.Namespace)
}

// Remove says whether retire steps also remove the version: not when a deployment tool manages
// the CRD (its own apply removes it).
func (p *crdPlan) Remove() bool { return !p.managedBy.Managed() }

func (p *crdPlan) retireCommand(v string) string {
	cmd := fmt.Sprintf("kubectl crdver retire %s %s --to %s", p.next.Name, v, p.storage)
	if p.Remove() {
		cmd += " --remove"
	}
	return cmd
}

func (p *crdPlan) removeWhy(v string) string {
	if !p.Remove() {
		return ""
	}
	return fmt.Sprintf("; then remove %s from spec.versions (the apply below would not delete a version entry another field manager owns)", v)
}

// itemSteps are the runbook's commands (or, for a step without one, what to do) for one CRD:
// Item.Steps, the per-CRD view of the release runbook.
func itemSteps(steps []RunbookStep) []string {
	out := []string{}
	for _, s := range steps {
		consent := slices.ContainsFunc(s.Commands, func(c string) bool { return strings.Contains(c, " --"+OverrideAllowDataLoss) })
		if len(s.Commands) == 0 || consent || s.Action == ActionFixObjects || s.Action == ActionConvertObjects || s.Action == ActionFixRecreate || s.Action == ActionChangeWriters {
			out = append(out, "# "+s.Why)
		}
		out = append(out, s.Commands...)
	}
	return out
}

// writersToChange says which field managers write a version the release removes or unserves
// and what to change ("" when none must change). One-time kubectl writes need nothing.
func writersToChange(p *crdPlan) string {
	var parts []string
	for _, mv := range p.it.ManagedFields {
		if !mv.RemovedByThisChange && !mv.UnservedByThisChange {
			continue
		}
		var writers []string
		for _, m := range mv.Managers {
			if !slices.Contains(oneTimeManagers, m) {
				writers = append(writers, m)
			}
		}
		if len(writers) == 0 {
			continue
		}
		what := "stops serving"
		if mv.RemovedByThisChange {
			what = "removes"
		}
		parts = append(parts, fmt.Sprintf("%s wrote %s/%s, which the release %s: change their manifests and clients (GitOps sources, controllers) to apiVersion %s/%s before the apply, or their next write fails (NotFound / no matches for kind)",
			strings.Join(writers, ", "), p.next.Spec.Group, mv.Version, what, p.next.Spec.Group, p.storage))
	}
	return strings.Join(parts, "; ")
}

func objects(n int) string {
	if n == 1 {
		return "1 object"
	}
	return fmt.Sprintf("%d objects", n)
}

func editCommand(resource string, f Finding) string {
	if f.Namespace == "" {
		return fmt.Sprintf("kubectl edit %s %s", resource, f.Name)
	}
	return fmt.Sprintf("kubectl edit %s %s -n %s", resource, f.Name, f.Namespace)
}

func capList(s []string) []string {
	if len(s) <= objectsShown {
		return s
	}
	return append(s[:objectsShown:objectsShown], fmt.Sprintf("… and %d more (kubectl crdver plan -o json lists them all)", len(s)-objectsShown))
}

// storedVersionsOf is the live status.storedVersions (the storage version when unknown), in
// priority order.
func storedVersionsOf(live *apiextensionsv1.CustomResourceDefinition) []string {
	out := append([]string{}, live.Status.StoredVersions...)
	if len(out) == 0 {
		if s := crdinfo.StorageVersion(live); s != "" {
			out = []string{s}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return version.CompareKubeAwareVersionStrings(b, a) })
	return out
}
