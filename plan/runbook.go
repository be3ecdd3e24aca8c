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
	"github.com/crdver/kubectl-crdver/preflight"
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
	// FixValues: the step's rewrite first converts the values of the CRD's objects that do
	// not fit the new storage version's typed schema (migrate --fix-values; upgrade does it
	// when run with --fix-values).
	FixValues bool `json:"fixValues,omitempty"`
}

// JoinFiles names several files of -f in one command line ("a.yaml -f b.yaml"): the form of
// RunbookOptions.ApplyFile, PathRelease.File and the command lines built from them.
func JoinFiles(files []string) string { return strings.Join(files, filesSep) }

const filesSep = " -f "

// RunbookOptions tune the runbook's commands.
type RunbookOptions struct {
	// ApplyFile names the new CRDs as given to -f ("" is NEW-CRDS.yaml; several are joined
	// by JoinFiles).
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
// stored version that holds data → values of another type that no command converts, for a
// person → per CRD: storage switch (through an intermediate CRD when the live one lacks the
// new storage version), values converted (--fix-values), rewrite, trim, managedFields moved →
// one server-side apply of the release (or the deployment tool's) → values the apply makes
// mistyped converted → verify. Nothing it runs leaves a CRD half-done: objects whose next
// write would be rejected are fixed before any storage switch, and the release is applied
// once, after every CRD is ready for it. Nothing it asks a person to run before the backup
// drops data: a write at the new storage version (which prunes what it lacks) comes after.
func Runbook(items []Item, o RunbookOptions) []RunbookStep {
	b := newRunbook(items, o)
	b.webhook()
	b.fix()
	b.fixCRDs()
	b.backup()
	if len(b.blocked) > 0 {
		return b.steps // nothing is written while the release cannot be applied
	}
	b.valuesForPerson()
	b.intermediate()
	b.storage()
	b.apply()
	b.valuesAfterApply()
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
// objects losing fields, objects invalid on re-create, writers of versions that go away.
// (Values of the wrong type come after the backup: valuesForPerson, and the storage steps.)
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
		// Counted over every finding, listed or not (findings.go).
		nRejected, nLosing := p.it.CountObjects(KindRejectedWrite), p.it.LosingObjects()
		if len(rejected) > 0 {
			b.add(RunbookStep{Phase: PhaseFix, Action: ActionFixObjects, CRDs: []string{p.next.Name}, Manual: DecisionFor(KindRejectedWrite).Manual,
				Objects: capListOf(rejected, nRejected), Commands: capListOf(rejectedCmds, nRejected),
				Why: fmt.Sprintf("%s of %s would be rejected on their next write under the new CRD: fix them before any storage switch, or the rewrite fails on them and leaves %s half-migrated", objects(int(nRejected)), p.next.Name, p.next.Name)})
		}
		if len(losing) > 0 {
			b.add(RunbookStep{Phase: PhaseFix, Action: ActionConvertObjects, CRDs: []string{p.next.Name}, Manual: DecisionFor(KindDataLoss).Manual,
				Objects: capListOf(losing, nLosing), Commands: capListOf(losingCmds, nLosing),
				Why: fmt.Sprintf("fields the new version %[3]s lacks are held by %[1]s of %[2]s: rewriting at %[3]s drops them from etcd. Move the data to the fields %[3]s has (the release's own migration guide says how), or accept the loss: kubectl crdver upgrade refuses unless --allow-data-loss; the backup below keeps it", objects(int(nLosing)), p.next.Name, p.storage)})
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
		dataFlag, consentWhy := p.consent(b.backedUp[p.live.Name], b.backupFile)
		ownersFlag, ownersWhy := p.ownershipConsent()
		flag := dataFlag + ownersFlag
		consentWhy += ownersWhy
		if p.fixAt() == fixInStorage && len(p.removedStored) > 0 {
			// The retire steps below rewrite as well, but have no --fix-values: the values are
			// converted, and the objects rewritten, first.
			b.add(p.fixValuesStep(PhaseStorage, flag, consentWhy))
		}
		for i, v := range p.removedStored {
			why := fmt.Sprintf("move %s's managedFields entries of %s to %s (server-side apply fails on objects that keep them once %s is gone)", name, v, s, v)
			if i == 0 {
				why = fmt.Sprintf("make %s the storage version of %s, rewrite every object at it, trim status.storedVersions to [%s] and move managedFields entries of %s to %s: the release removes %s", s, name, s, v, s, v)
			}
			b.add(RunbookStep{Phase: PhaseStorage, Action: ActionRetire, CRDs: []string{name}, Version: v, Target: s, Why: why + p.removeWhy(v) + consentWhy, Remove: p.Remove(),
				Commands: []string{p.retireCommand(v) + flag}})
		}
		if len(p.removedStored) == 0 && p.migrate {
			if p.fixAt() == fixInStorage {
				b.add(p.fixValuesStep(PhaseStorage, flag, consentWhy))
			} else {
				b.add(RunbookStep{Phase: PhaseStorage, Action: ActionMigrate, CRDs: []string{name}, Target: s, Commands: []string{p.migrateCommand() + flag},
					Why: fmt.Sprintf("make %s the storage version of %s, rewrite every object at it and trim status.storedVersions to [%s]", s, name, s) + consentWhy})
			}
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
		b.pointConvertToConsent(name, dataFlag)
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
	lossy := p.it.LosingObjects() // every finding, listed or not (findings.go)
	var kind Kind
	switch {
	case lossy > 0:
		kind = KindDataLoss
		what = fmt.Sprintf("it drops from etcd the fields the convert-objects step above lists (%s of %s) unless you moved their data", objects(int(lossy)), p.next.Name)
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

// ownershipConsent is the consent the CRD's retire and migrate commands carry when plan
// predicts that the rewrite drops field managers (decision table: ownership-loss's Consent),
// and what the step then says: the objects and managers, named before the runbook's first
// write, so that the user decides there (the command's preflight refuses without it).
func (p *crdPlan) ownershipConsent() (flag, why string) {
	kt := p.it.tally().of(KindOwnershipLoss)
	d := DecisionFor(KindOwnershipLoss)
	if kt.count == 0 || d.Consent == "" {
		return "", ""
	}
	n := int(kt.count)
	return " --" + d.Consent, fmt.Sprintf(". --%s is your consent to losing field managers: the rewrite at %s drops every manager of %s (%s): %s. The backup does not keep managedFields: each manager takes its fields back by applying again (its next server-side apply from its source). Leave --%s out to keep them: the command then refuses, listing them, before it writes",
		d.Consent, p.storage, objects(n), kt.first, kt.nameList(), d.Consent)
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

// Where a CRD's values of another type are converted (crdPlan.fixAt).
const (
	fixNone = iota
	// fixInStorage: by its first storage step (migrate --fix-values), once its storage
	// version is the new one, with the new schema, and before the rewrite.
	fixInStorage
	// fixAfterApply: after the apply (migrate --fix-values): until then the live CRD's schema
	// of the storage version types the values as they are.
	fixAfterApply
)

// mistyped are the CRD's objects holding values whose type does not fit the new storage
// version's typed schema (decision table: KindTypeMismatch).
func (p *crdPlan) mistyped() []Finding {
	var out []Finding
	for _, f := range p.it.Objects.Findings {
		if len(f.TypeMismatches) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// fixAt is where the CRD's values of another type are converted: in its storage steps when
// the storage version becomes the new one with the new schema there (an intermediate CRD, or
// a live CRD whose schema of it is already the new one), else after the apply.
func (p *crdPlan) fixAt() int {
	switch {
	case p.live == nil || len(p.mistyped()) == 0:
		return fixNone
	case p.migrate && (p.intermediate || equalSchemas(p.live, p.next, p.storage)):
		return fixInStorage
	}
	return fixAfterApply
}

// ValuesConvert reports whether every value of the object that does not fit the new storage
// version's typed schema converts without loss to a value the API server accepts: upgrade
// --fix-values and migrate --fix-values convert it. False when it holds none.
func (f *Finding) ValuesConvert() bool {
	for _, m := range f.TypeMismatches {
		if m.Converted == "" {
			return false
		}
	}
	return len(f.TypeMismatches) > 0
}

// ValuesSpelledAsText reports whether every value of the object that does not convert is text
// where the new version expects a map or a list: a person can change the text (at a version
// whose schema keeps it text) so that it parses to what the new version accepts, after which
// it converts.
func (f *Finding) ValuesSpelledAsText() bool {
	for _, m := range f.TypeMismatches {
		if m.Converted == "" && (m.ValueType != "string" || m.Expected != "map" && m.Expected != "list") {
			return false
		}
	}
	return len(f.TypeMismatches) > 0
}

// notAtMismatches are the errors not about a value of another type (at or below a mismatch's
// path): the type-mismatch finding and its conversion (fix-values) deal with those, not the
// fix-invalid-on-recreate step.
func notAtMismatches(errs []string, tm []preflight.TypeMismatch) []string {
	var out []string
	for _, e := range errs {
		at := false
		for _, m := range tm {
			p := strings.TrimPrefix(m.Path, ".")
			at = at || p != "" && (strings.HasPrefix(e, p+":") || strings.HasPrefix(e, p+".") || strings.HasPrefix(e, p+"["))
		}
		if !at {
			out = append(out, e)
		}
	}
	return out
}

func (p *crdPlan) migrateCommand() string {
	cmd := fmt.Sprintf("kubectl crdver migrate %s", p.next.Name)
	if !p.intermediate && p.it.StorageVersion.Before != p.storage {
		cmd += " --to " + p.storage
	}
	return cmd
}

// fixValuesStep is the storage step that converts the CRD's values of another type before its
// rewrite (migrate --fix-values), in phase: each object it converts, with what each value
// becomes, and why it may write then.
func (p *crdPlan) fixValuesStep(phase, flag, consentWhy string) RunbookStep {
	name, s := p.next.Name, p.storage
	var objs []string
	for _, f := range p.mistyped() {
		var what []string
		for _, m := range f.TypeMismatches {
			line := m.Describe(s)
			if f.ValuesConvert() {
				line += " → " + m.Converted
			}
			what = append(what, line)
		}
		if !f.ValuesConvert() {
			what = append(what, "converted once you have changed it (the fix-values step above)")
		}
		objs = append(objs, objectName(&f)+": "+strings.Join(what, "; "))
	}
	cmd := "kubectl crdver migrate " + name + " --fix-values"
	if phase == PhaseStorage {
		cmd = p.migrateCommand() + " --fix-values"
	}
	when := fmt.Sprintf("once %s is the storage version of %s (with the new schema: the steps above), after the backup", s, name)
	if phase != PhaseStorage {
		when = fmt.Sprintf("now that the release is applied (until then the live schema of %s typed them as they are), after the backup", s)
	}
	why := fmt.Sprintf("%s of %s %s values whose type does not fit the typed schema of %s (listed): the API server accepts %s no-op writes, but server-side apply fails on %s and a rewrite cannot record %s field ownership (servers before 1.37 drop all of %s managedFields). --fix-values converts each value without loss (YAML text to the object or list it spells, a scalar to a one-element list, a number to its string), %s: written at %s, where it drops nothing the rewrite does not drop as well, and keeping every field manager (their managedFields entries moved to %s and to the new values' paths); then it makes %s the storage version of %s if it is not yet, rewrites every object at it and trims status.storedVersions to [%s]. Without the flag it refuses, listing them",
		objects(len(objs)), name, agree(len(objs), "holds", "hold"), s, agree(len(objs), "its", "their"), agree(len(objs), "it", "them"), agree(len(objs), "its", "their"), agree(len(objs), "its", "their"), when, s, s, s, name, s)
	return RunbookStep{Phase: phase, Action: ActionMigrate, CRDs: []string{name}, Target: s, FixValues: true,
		Objects: capList(objs), Commands: []string{cmd + flag}, Why: why + p.oldWritersWhy() + consentWhy}
}

// oldWritersWhy says which managers that write again (not one-time kubectl writes) wrote
// another version than the new storage version: once the values are converted, a write at a
// version whose schema has the old type cannot be typed ("" when none).
func (p *crdPlan) oldWritersWhy() string {
	var parts []string
	for _, mv := range p.it.ManagedFields {
		if mv.Version == p.storage {
			continue
		}
		var writers []string
		for _, m := range mv.Managers {
			if !slices.Contains(oneTimeManagers, m) {
				writers = append(writers, m)
			}
		}
		if len(writers) > 0 {
			parts = append(parts, fmt.Sprintf("%s wrote %s", strings.Join(writers, ", "), mv.Version))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf(". Once the values are converted, a version whose schema has the old type cannot hold them: a read there shows them pruned (an object where the schema says text reads as {}), a write there cannot be typed (server-side apply fails; servers before 1.37 drop every field manager of the object on an update): %s; stop those that read or write it before this step and have them use %s (the release's operator, GitOps manifests at %s) from then on", strings.Join(parts, "; "), p.storage, p.storage)
}

// valuesForPerson adds, per CRD, the step for a person about the objects holding values of
// another type that do not convert without loss (decision table: KindTypeMismatch): after the
// backup, before any storage step. Where the value is text (YAML for a map or a list), the
// person changes the text at a version whose schema keeps it text, so that it converts: a
// write there drops nothing and keeps every field manager (the API server types it). Other
// values can only be written at the new storage version once the storage steps are done.
func (b *runbook) valuesForPerson() {
	for _, p := range b.plans {
		if p.fixAt() == fixNone {
			continue
		}
		at := p.personVersion()
		resource := p.next.Spec.Names.Plural + "." + at + "." + p.next.Spec.Group
		var objs, cmds, unspelled []string
		for _, f := range p.mistyped() {
			if f.ValuesConvert() {
				continue
			}
			var what []string
			for _, m := range f.TypeMismatches {
				switch {
				case len(m.ConvertedErrors) > 0:
					what = append(what, m.Describe(p.storage)+": converted, "+p.storage+" rejects it ("+strings.Join(m.ConvertedErrors, "; ")+")")
				case m.Converted == "":
					what = append(what, m.Describe(p.storage)+" (no lossless conversion)")
				}
			}
			name := objectName(&f)
			if !f.ValuesSpelledAsText() {
				unspelled = append(unspelled, name)
			}
			objs = append(objs, name+": "+strings.Join(what, "; "))
			cmds = append(cmds, getCommand(resource, f), editCommand(resource, f))
		}
		if len(objs) == 0 {
			continue
		}
		why := fmt.Sprintf("%s of %s %s values whose type does not fit the typed schema of %s and that --fix-values cannot convert (listed). Change each at %s, now that the backup above holds %s: where the value is YAML text, change the text so that it parses to what %s accepts (the API server's errors listed say what it lacks); a write at %s keeps every field and every field manager (the API server types the object there). The step below that says --fix-values then converts %s with the others, keeping %s field managers; kubectl crdver plan -f %s lists %s as converting (kubectl crdver upgrade --fix-values stops here until you have)",
			objects(len(objs)), p.next.Name, agree(len(objs), "holds", "hold"), p.storage, at, agree(len(objs), "it", "them"), p.storage, at, agree(len(objs), "it", "them"), agree(len(objs), "its", "their"), b.file, agree(len(objs), "it", "them"))
		if len(unspelled) > 0 {
			why += fmt.Sprintf(". No text spells a value of %s (%s): change %s at %s once the storage steps are done, which drops %s field managers on servers before 1.37 (kubectl crdver upgrade refuses %s)",
				strings.Join(unspelled, ", "), p.storage, agree(len(unspelled), "it", "them"), p.storage, agree(len(unspelled), "its", "their"), agree(len(unspelled), "it", "them"))
		}
		if len(cmds) > 2*objectsShown {
			cmds = append(cmds[:2*objectsShown:2*objectsShown], fmt.Sprintf("… and %d more (kubectl crdver plan -o json lists them all)", len(objs)-objectsShown))
		}
		b.add(RunbookStep{Phase: PhaseFix, Action: ActionFixValues, CRDs: []string{p.next.Name}, Version: at, Target: p.storage, Manual: true,
			Objects: capList(objs), Commands: cmds, Why: why})
	}
}

// personVersion is the version a person changes values of the old type at: one the live CRD
// serves other than the new storage version (whose schema holds the old type), the version
// objects are listed at first; the new storage version when there is none.
func (p *crdPlan) personVersion() string {
	if v := ListVersion(p.live); v != "" && v != p.storage {
		return v
	}
	for _, v := range crdinfo.VersionNames(p.live) {
		if lv, _ := crdinfo.Lookup(p.live, v); lv.Served && v != p.storage {
			return v
		}
	}
	return p.storage
}

// valuesAfterApply adds, per CRD whose values of another type fit the live schema until the
// apply, their conversion after it (fixAt: fixAfterApply).
func (b *runbook) valuesAfterApply() {
	for _, p := range b.plans {
		if p.fixAt() != fixAfterApply {
			continue
		}
		flag, consentWhy := p.consent(b.backedUp[p.live.Name], b.backupFile)
		b.add(p.fixValuesStep(PhaseApply, flag, consentWhy))
	}
}

// equalSchemas reports whether version v has the same schema in a and b.
func equalSchemas(a, b *apiextensionsv1.CustomResourceDefinition, v string) bool {
	av, err1 := crdinfo.Lookup(a, v)
	bv, err2 := crdinfo.Lookup(b, v)
	return err1 == nil && err2 == nil && equality.Semantic.DeepEqual(av.Schema, bv.Schema)
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
	n := int(p.it.CountObjects(KindInvalidOnRecreate)) // every finding, listed or not (findings.go)
	why := fmt.Sprintf("%s of %s %s the new schema of %s: the API server accepts %s writes (it ratchets fields that do not change), so the upgrade goes on, but re-creating %s as %s (a restore, a GitOps replace) is rejected with the errors below. Edit each so that it is valid, %s; the verify step passes once none is left",
		objects(n), p.next.Name, agree(n, "violates", "violate"), v, agree(n, "its", "their"), agree(n, "it", "them"), agree(n, "it is", "they are"), when)
	if len(cmds) > 2*objectsShown {
		cmds = append(cmds[:2*objectsShown:2*objectsShown], capListOf(objs, int64(n))[objectsShown])
	}
	return RunbookStep{Phase: PhaseFix, Action: ActionFixRecreate, CRDs: []string{p.next.Name}, Target: v, Manual: DecisionFor(KindInvalidOnRecreate).Manual,
		Objects: capListOf(objs, int64(n)), Commands: cmds, Why: why}, true
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
		consent := slices.ContainsFunc(s.Commands, func(c string) bool {
			return strings.Contains(c, " --"+OverrideAllowDataLoss) || strings.Contains(c, " --"+OverrideAllowOwnershipLoss)
		})
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
