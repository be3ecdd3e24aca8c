package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/crdver/kubectl-crdver/migrate"
)

// Waves says how many clusters each wave of a rollout takes: Sizes in order, then (Rest) every
// cluster left in one last wave; without Rest the last size repeats until no cluster is left.
type Waves struct {
	Sizes []int
	Rest  bool
}

// DefaultWaves is a canary of one cluster, then the rest.
var DefaultWaves = Waves{Sizes: []int{1}, Rest: true}

// ParseWaves reads a waves spec: sizes separated by commas, "rest" last for every cluster
// left ("1,3,rest"). The error says what is wrong with it.
func ParseWaves(spec string) (Waves, error) {
	var w Waves
	parts := strings.Split(spec, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "rest" {
			if i != len(parts)-1 {
				return Waves{}, fmt.Errorf("%q: rest must come last (it is every cluster left)", spec)
			}
			if i == 0 {
				return Waves{}, fmt.Errorf("%q: give the size of the first wave before rest (e.g. 1,rest)", spec)
			}
			w.Rest = true
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return Waves{}, fmt.Errorf("%q: %q is not a number of clusters (1 or more) or rest", spec, p)
		}
		w.Sizes = append(w.Sizes, n)
	}
	return w, nil
}

// Canary is a first wave of n clusters, then the rest.
func Canary(n int) Waves { return Waves{Sizes: []int{n}, Rest: true} }

// String is the spec ParseWaves reads.
func (w Waves) String() string {
	var parts []string
	for _, n := range w.Sizes {
		parts = append(parts, strconv.Itoa(n))
	}
	if w.Rest {
		parts = append(parts, "rest")
	}
	return strings.Join(parts, ",")
}

// Split splits n clusters (by index, in order) into waves.
func (w Waves) Split(n int) [][]int {
	var out [][]int
	next := 0
	take := func(size int) {
		var wave []int
		for ; size > 0 && next < n; size-- {
			wave = append(wave, next)
			next++
		}
		if len(wave) > 0 {
			out = append(out, wave)
		}
	}
	for _, s := range w.Sizes {
		take(s)
	}
	switch {
	case next >= n:
	case w.Rest || len(w.Sizes) == 0:
		take(n - next)
	default:
		last := w.Sizes[len(w.Sizes)-1]
		for next < n {
			take(last)
		}
	}
	return out
}

// PlanWaves gives a plan's report its waves: the clusters ready for the release (the plan
// exits 0 and needs no release before the target) split by w, in the report's order, each
// row told its wave, and the others held back; and the waves as Argo CD RollingSync steps on
// the Applications' label (label).
func (r *Report) PlanWaves(w Waves, label string) {
	var ready []int
	for i := range r.Rows {
		row := &r.Rows[i]
		if row.Finished() && row.ExitCode == 0 && len(row.Path) == 0 && row.SameAs == "" {
			ready = append(ready, i)
		} else if row.SameAs == "" {
			r.HeldBack = append(r.HeldBack, row.Name)
		}
	}
	for wi, wave := range w.Split(len(ready)) {
		var names []string
		for _, k := range wave {
			row := &r.Rows[ready[k]]
			row.Wave = wi + 1
			names = append(names, row.Name)
		}
		r.Waves = append(r.Waves, names)
	}
	r.ArgoCD = RollingSyncOf(r.Waves, label)
}

// Rollout is an upgrade of a fleet, wave after wave: each wave starts when every cluster of
// the one before ended with the release applied and verified (or found in place), and the
// rollout stops at the first cluster that does not (unless KeepGoing). The clusters are
// probed first, so that two names of one cluster are upgraded once (the later one's row says
// SameAs and follows the earlier one's).
type Rollout struct {
	Clusters []Cluster
	// Rows are the clusters' rows, in the order given; Waves the unique clusters' indexes in
	// Rows, wave by wave.
	Rows  []Row
	Waves [][]int
}

// RolloutOptions are a rollout's.
type RolloutOptions struct {
	Options
	Waves Waves
	// KeepGoing: a cluster that refuses or fails does not stop the rollout.
	KeepGoing bool
	// Probe reads each cluster's identity before the waves are made (nil: none are, and no
	// two names are taken for one cluster).
	Probe func(ctx context.Context, c Cluster) Row
}

// PlanRollout probes the clusters (o.Parallel at once) and makes the waves of the unique
// ones that answered or not (a cluster that did not answer keeps its place: its wave finds it
// unreachable again, or not).
func PlanRollout(ctx context.Context, clusters []Cluster, o RolloutOptions) *Rollout {
	ro := &Rollout{Clusters: clusters}
	if o.Probe != nil {
		po := o.Options
		po.Run, po.Stop, po.Started, po.Done = o.Probe, nil, nil, nil
		ro.Rows, _ = Run(ctx, clusters, po)
	} else {
		ro.Rows = make([]Row, len(clusters))
		for i, c := range clusters {
			ro.Rows[i] = Row{Cluster: c}
		}
	}
	first := map[string]string{}
	var unique []int
	for i := range ro.Rows {
		row := &ro.Rows[i]
		row.State, row.ExitCode, row.Error, row.Need, row.Seconds = StateNotStarted, 0, "", "", 0
		if id := row.ClusterID; id != "" {
			if f, ok := first[id]; ok {
				row.SameAs = f
				continue
			}
			first[id] = row.Name
		}
		unique = append(unique, i)
	}
	for _, wave := range o.Waves.Split(len(unique)) {
		var idx []int
		for _, k := range wave {
			idx = append(idx, unique[k])
		}
		ro.Waves = append(ro.Waves, idx)
	}
	for wi, wave := range ro.Waves {
		for _, i := range wave {
			ro.Rows[i].Wave = wi + 1
		}
	}
	return ro
}

// Preview is the rollout before it runs: its clusters and waves, for the question before it.
func (ro *Rollout) Preview(command string) *Report {
	r := &Report{Command: command, Rows: ro.Rows, Groups: []Group{}}
	r.Waves = ro.waveNames()
	return r
}

func (ro *Rollout) waveNames() [][]string {
	var out [][]string
	for _, wave := range ro.Waves {
		var names []string
		for _, i := range wave {
			names = append(names, ro.Rows[i].Name)
		}
		out = append(out, names)
	}
	return out
}

// RolloutWaves gives the report the waves a rollout of its clusters takes (an upgrade's dry
// run): every cluster but the later names of one cluster, split by w, in the report's order.
func (r *Report) RolloutWaves(w Waves) {
	var unique []int
	for i := range r.Rows {
		if r.Rows[i].SameAs == "" {
			unique = append(unique, i)
		}
	}
	for wi, wave := range w.Split(len(unique)) {
		var names []string
		for _, k := range wave {
			r.Rows[unique[k]].Wave = wi + 1
			names = append(names, r.Rows[unique[k]].Name)
		}
		r.Waves = append(r.Waves, names)
	}
}

// Upgraded reports whether a rollout's row ended with the release applied and verified (by
// this run or found in place).
func Upgraded(r Row) bool { return r.Finished() && (r.Upgraded || r.InPlace != nil && *r.InPlace) }

// Run runs the waves: o.Run on each cluster of a wave, o.Parallel at once; the next wave when
// every cluster of this one is Upgraded; else (without KeepGoing) no cluster after the first
// that is not, and the report says where it stopped.
func (ro *Rollout) Run(ctx context.Context, o RolloutOptions) *Report {
	var stopped string
	for wi, wave := range ro.Waves {
		if ctx.Err() != nil || stopped != "" {
			break
		}
		clusters := make([]Cluster, len(wave))
		for k, i := range wave {
			clusters[k] = ro.Clusters[i]
		}
		opts := o.Options
		if !o.KeepGoing {
			opts.Stop = func(r Row) bool { return !Upgraded(r) }
		}
		rows, _ := Run(ctx, clusters, opts)
		var failed []string
		for k, i := range wave {
			row := rows[k]
			row.Wave, row.Server, row.ClusterID = wi+1, ro.Rows[i].Server, ro.Rows[i].ClusterID
			if row.KubernetesVersion == "" {
				row.KubernetesVersion = ro.Rows[i].KubernetesVersion
			}
			if row.State == StateNotStarted {
				row.Error = ""
			}
			ro.Rows[i] = row
			if row.State != StateNotStarted && !Upgraded(row) {
				failed = append(failed, row.Name)
			}
		}
		if len(failed) > 0 && !o.KeepGoing && ctx.Err() == nil {
			stopped = fmt.Sprintf("the rollout stopped in wave %d of %d at %s: the release is not applied and verified there; nothing was started after it (fix it and run the same command again: the clusters done are skipped)",
				wi+1, len(ro.Waves), strings.Join(failed, ", "))
		}
	}
	// The other names of a cluster follow its row.
	byName := map[string]*Row{}
	for i := range ro.Rows {
		byName[ro.Rows[i].Name] = &ro.Rows[i]
	}
	for i := range ro.Rows {
		row := &ro.Rows[i]
		if row.SameAs == "" {
			if row.State == StateNotStarted {
				row.Need = NeedRunAgain
				if stopped != "" {
					row.Need, row.Error = NeedRollout, "not started: the rollout stopped before it"
				}
			}
			continue
		}
		f := byName[row.SameAs]
		row.State, row.ExitCode, row.Upgraded, row.InPlace, row.Verdict, row.KubernetesVersion = StateSkipped, f.ExitCode, f.Upgraded, f.InPlace, f.Verdict, f.KubernetesVersion
		row.Need = f.Need
		row.Error = ""
		row.Blocker = "the same cluster as " + f.Name + " (kube-system namespace " + migrate.ShortUID(row.ClusterID) + "): upgraded once, as " + f.Name
	}
	rep := NewReport("", ro.Rows, ctx.Err() != nil)
	rep.Stopped = stopped
	rep.Waves = ro.waveNames()
	if stopped != "" {
		rep.ExitCode = max(rep.ExitCode, 1)
	}
	return rep
}
