package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// States of a cluster's row: how far its run got.
const (
	// StateDone: the command ran to its end on the cluster (whatever it found: ExitCode).
	StateDone = "done"
	// StateFailed: the command could not complete on the cluster (exit 2 or 3: forbidden, a
	// usage error for this cluster, a webhook or the network failing during the run).
	StateFailed = "failed"
	// StateUnreachable: the cluster did not answer (its /version could not be read).
	StateUnreachable = "unreachable"
	// StateTimedOut: the cluster's run took longer than the per-cluster timeout and was stopped.
	StateTimedOut = "timed out"
	// StateInterrupted: the fleet run was interrupted (Ctrl-C, SIGTERM) while the cluster's
	// run was in flight; it was stopped.
	StateInterrupted = "interrupted"
	// StateNotStarted: the cluster's run never began (interrupted, or a rollout stopped first).
	StateNotStarted = "not started"
	// StateSkipped: the cluster needed no run (the release is in place already; or another
	// name of the fleet reaches the same cluster: SameAs).
	StateSkipped = "skipped"
)

// Row is one cluster's line of the fleet report: what its single run found, in a few fields.
type Row struct {
	Cluster
	// Server is the API server's URL the cluster's kubeconfig names; ClusterID the cluster's
	// identity (its kube-system namespace's UID, "" when not readable), which tells two names
	// of one cluster apart from two clusters behind one address (SameAs).
	Server    string `json:"server,omitempty"`
	ClusterID string `json:"clusterID,omitempty"`
	// SameAs names the earlier row of the fleet that reaches the same cluster (ClusterID).
	SameAs string `json:"sameAs,omitempty"`
	// KubernetesVersion is the cluster's (its /version's gitVersion).
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// InPlace: the release is in place on the cluster already (upgrade status's rule: every
	// CRD applied as it is and stored at its storage version alone); nil when not asked or
	// not known.
	InPlace *bool `json:"inPlace,omitempty"`
	// Verdict is the single run's verdict: plan's (the decision table's: safe, stricter,
	// invalid-on-recreate, unknown, breaking), upgrade's result, doctor's worst severity, …
	Verdict string `json:"verdict,omitempty"`
	// Path is the releases the cluster needs to reach the target, in order (the target
	// last), when the run planned a path; empty when it needs the target alone.
	Path []string `json:"path,omitempty"`
	// Blocker is the first finding that keeps the cluster from the release (or the first
	// problem the run found), one sentence; Objects how many objects have findings.
	Blocker string `json:"blocker,omitempty"`
	Objects int64  `json:"objects"`
	// Need is what the cluster needs, as the report groups the clusters (Need* constants).
	Need string `json:"need"`
	// Upgraded: the release is applied and verified on the cluster, by this run or an
	// earlier one (upgrade only).
	Upgraded bool `json:"upgraded,omitempty"`
	// Wave is the wave (1-based) the cluster is in, when the report has waves (0: in none).
	Wave int `json:"wave,omitempty"`
	// State is how far the cluster's run got (State* constants); ExitCode its exit status
	// (DESIGN.md's: 0 ok, 1 findings, 2 usage, 3 could not complete; 0 for a run not
	// started, which the report's exit code counts as the interruption or the stop says);
	// Error the run's error line, when it had one.
	State    string `json:"state"`
	ExitCode int    `json:"exitCode"`
	Error    string `json:"error,omitempty"`
	// Seconds is how long the cluster's run took.
	Seconds float64 `json:"seconds"`
	// Command is the single run that shows this cluster's whole report.
	Command string `json:"command,omitempty"`
}

// Finished reports whether the cluster's run got to an answer (done or skipped).
func (r *Row) Finished() bool { return r.State == StateDone || r.State == StateSkipped }

// Shown is the verdict and the blocker as a report shows them: the state when the run got no
// answer, the run's error when it failed, the earlier name of the same cluster.
func (r *Row) Shown() (verdict, blocker string) {
	verdict, blocker = r.Verdict, r.Blocker
	if verdict == "" || !r.Finished() && r.State != StateFailed {
		verdict = r.State // a run that failed with a report keeps its verdict (doctor's incomplete)
	}
	if r.Error != "" && (blocker == "" || r.ExitCode > 1) {
		blocker = r.Error
	}
	if same := "the same cluster as " + r.SameAs; r.SameAs != "" && !strings.HasPrefix(blocker, same) {
		blocker = strings.TrimSuffix(same+"; "+blocker, "; ")
	}
	return verdict, blocker
}

// RunFunc runs the command on one cluster and returns its row. ctx ends when the cluster's
// timeout passes or the fleet run is interrupted: the run must then stop within a second
// (plugin's stops its child process). Run fills Cluster, Seconds and, when ctx ended, State.
type RunFunc func(ctx context.Context, c Cluster) Row

// Options of Run.
type Options struct {
	// Parallel is how many clusters run at once (at least 1).
	Parallel int
	// Timeout bounds each cluster's run (0: no bound).
	Timeout time.Duration
	// Run runs the command on one cluster.
	Run RunFunc
	// Stop, when set, is asked after each cluster's run: true starts no further cluster
	// (the ones in flight finish). A rollout stops at the first cluster that refuses.
	Stop func(Row) bool
	// Started and Done, when set, are called as each cluster's run starts and ends (from
	// several goroutines: they must be safe for that).
	Started func(Cluster)
	Done    func(Row)
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Run runs o.Run on each cluster, at most o.Parallel at once, in the order given, each within
// o.Timeout, and returns their rows in that order. When ctx ends (Ctrl-C) no further cluster
// starts, the ones in flight are stopped (their rows say interrupted), and the rows of the
// clusters never started say so; Run returns within the second the runs take to stop.
// stopped reports whether o.Stop stopped it.
func Run(ctx context.Context, clusters []Cluster, o Options) (rows []Row, stopped bool) {
	if o.Parallel < 1 {
		o.Parallel = 1
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	rows = make([]Row, len(clusters))
	for i, c := range clusters {
		rows[i] = Row{Cluster: c, State: StateNotStarted}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		halt bool
	)
	slots := make(chan struct{}, o.Parallel)
	for i, c := range clusters {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		mu.Lock()
		over := halt || ctx.Err() != nil
		mu.Unlock()
		if over {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			row := runOne(ctx, c, o, now)
			mu.Lock()
			rows[i] = row
			if o.Stop != nil && o.Stop(row) {
				halt = true
			}
			mu.Unlock()
			if o.Done != nil {
				o.Done(row)
			}
		}()
	}
	wg.Wait()
	return rows, halt
}

// runOne runs one cluster within its timeout and says how its run ended when ctx or the
// timeout stopped it.
func runOne(ctx context.Context, c Cluster, o Options, now func() time.Time) Row {
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if o.Timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, o.Timeout)
	}
	defer cancel()
	if o.Started != nil {
		o.Started(c)
	}
	start := now()
	row := o.Run(cctx, c)
	row.Cluster = c
	row.Seconds = now().Sub(start).Seconds()
	if row.State == "" {
		row.State = StateDone // the run gave its answer, whether or not ctx ended meanwhile
	}
	switch {
	case ctx.Err() != nil && !row.Finished():
		row.State, row.ExitCode = StateInterrupted, 3
		if row.Error == "" {
			row.Error = "interrupted"
		}
	case errors.Is(cctx.Err(), context.DeadlineExceeded) && !row.Finished():
		row.State, row.ExitCode = StateTimedOut, 3
		row.Error = fmt.Sprintf("timed out after %s (stopped)", o.Timeout)
	}
	switch row.State {
	case StateInterrupted, StateTimedOut, StateUnreachable, StateNotStarted:
		row.Need = NeedOf(&row) // not what a report cut short says
	}
	if row.Need == "" {
		row.Need = NeedOf(&row)
	}
	return row
}
