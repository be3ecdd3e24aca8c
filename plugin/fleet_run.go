package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/internal/buildinfo"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/manifest"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// fleetRunner runs the command on one cluster of a fleet: the engine executable as a child
// process, with the command's own flags, the cluster's --context or --kubeconfig and -o json;
// the row is read from the report it prints (fleet.Summarize). The child judges the cluster
// as a single run does (its own Kubernetes version: the API server code judges as one version
// per process), holds the memory of one cluster and frees it when it exits.
type fleetRunner struct {
	f      *fleetFlags
	engine string
	// args is the command path and its flags as given, without the fleet's, -o and the
	// cluster's; statusArgs is `upgrade status` of the same release (plan, upgrade); operands
	// are the command's arguments (doctor's CRD names), which each run takes after every flag.
	args, statusArgs, operands []string
	// conn are the connection flags given (--as, --token, …), for the probe's client.
	conn []string
	kind fleet.Kind
	// display is the command as each cluster runs it, for people ("plan -f release/").
	display string
	dryRun  bool
	stamp   string
	// spooled are the inputs read once (stdin, a pipe) copied to files, which every child reads.
	spooled []*manifest.Spooled
}

// connFlags are the names of the connection flags (cli-runtime's ConfigFlags).
func connFlags() map[string]bool {
	fs := pflag.NewFlagSet("conn", pflag.ContinueOnError)
	genericclioptions.NewConfigFlags(true).AddFlags(fs)
	names := map[string]bool{}
	fs.VisitAll(func(fl *pflag.Flag) { names[fl.Name] = true })
	return names
}

// skipInChild are the flags a cluster's run does not take as given: the fleet's, the output's
// (a child prints JSON) and those that name the cluster.
var skipInChild = map[string]bool{
	"contexts": true, "all-contexts": true, "kubeconfigs": true, "output": true, "no-headers": true,
	"context": true, "kubeconfig": true, "quiet": true, "progress-interval": true, "yes": true,
}

func (f *fleetFlags) newRunner(ctx context.Context) (*fleetRunner, error) {
	exe, err := engine()
	if err != nil {
		return nil, err
	}
	r := &fleetRunner{f: f, engine: exe, kind: f.spec.kind, stamp: time.Now().UTC().Format("20060102-150405")}
	if f.spec.pathKind != "" && (f.changed("via") || f.changed("releases")) {
		r.kind = f.spec.pathKind
	}
	r.dryRun, _ = f.cmd.Flags().GetBool("dry-run")
	var path []string
	for c := f.cmd; c.HasParent(); c = c.Parent() {
		path = append([]string{c.Name()}, path...)
	}
	r.args = append(r.args, path...)
	conn := connFlags()
	var release, shown []string
	var spoolErr error
	visitChanged(f.cmd.Flags(), func(fl *pflag.Flag, value string) {
		name := fl.Name
		if skipInChild[name] || name == "backup" && f.spec.rollout || slices.Contains(fleetOnly, name) {
			return
		}
		shown = append(shown, shownFlag(fl, value)...)
		if (name == "filename" || name == "via") && spoolErr == nil {
			value, spoolErr = r.spoolInput(ctx, value)
		}
		arg := "--" + name + "=" + value
		r.args = append(r.args, arg)
		switch {
		case conn[name]:
			r.conn = append(r.conn, arg)
		case name == "filename" || name == "via" || name == "releases" || name == "field-manager" && f.spec.rollout:
			release = append(release, arg)
		}
	})
	if spoolErr != nil {
		r.close()
		return nil, inputError(spoolErr)
	}
	if args := f.cmd.Flags().Args(); len(args) > 0 {
		r.operands = args
		shown = append(shown, args...)
	}
	r.display = strings.Join(append(path, shown...), " ")
	if r.kind == fleet.KindPlan || r.kind == fleet.KindPlanPath || f.spec.rollout {
		r.statusArgs = append(append(append([]string{"upgrade", "status"}, release...), r.conn...), "-o", "json")
	}
	r.args = append(r.args, "-o", "json")
	if f.cmd.Flags().Lookup("quiet") != nil {
		r.args = append(r.args, "--quiet")
	}
	return r, nil
}

// spoolInput is an input file as every cluster's run reads it: stdin or a pipe copied to a
// temporary file once (manifest.Spool), else the file as given.
func (r *fleetRunner) spoolInput(ctx context.Context, file string) (string, error) {
	sp, err := manifest.Spool(ctx, []string{file}, r.f.g.In, "crdver-fleet-input-*.yaml", "each cluster's run reads it")
	r.spooled = append(r.spooled, sp)
	if err != nil {
		return "", err
	}
	return sp.Files[0], nil
}

func (r *fleetRunner) close() {
	for _, sp := range r.spooled {
		sp.Close()
	}
}

// clusterArgs are the flags that choose c.
func clusterArgs(c fleet.Cluster) []string {
	var a []string
	if c.Kubeconfig != "" {
		a = append(a, "--kubeconfig="+c.Kubeconfig)
	}
	if c.Context != "" {
		a = append(a, "--context="+c.Context)
	}
	return a
}

// command is the single run of c, for people: what shows its whole report.
func (r *fleetRunner) command(c fleet.Cluster) string {
	cmd := "kubectl crdver " + r.display
	if c.Kubeconfig != "" {
		cmd += " --kubeconfig " + c.Kubeconfig
	}
	if c.Context != "" {
		cmd += " --context " + c.Context
	}
	return cmd
}

// exec runs the engine with args on c: args, the flags that choose c, then the operands after
// "--" (after every flag: what follows "--" is an operand, never a flag).
func (r *fleetRunner) exec(ctx context.Context, args []string, c fleet.Cluster, operands ...string) fleet.ExecResult {
	all := append(append([]string{}, args...), clusterArgs(c)...)
	if len(operands) > 0 {
		all = append(append(all, "--"), operands...)
	}
	return fleet.Exec(ctx, fleet.Command{Path: r.engine, Args: all})
}

// probeTimeout bounds the probe of a cluster (its /version and identity).
const probeTimeout = 20 * time.Second

// probe reads c's Kubernetes version and identity (its kube-system namespace's UID) with the
// run's connection flags: a cluster that does not answer is a row that says so, without a run.
// The returned row's State is "" when it answered.
func (r *fleetRunner) probe(ctx context.Context, c fleet.Cluster) fleet.Row {
	row := fleet.Row{Cluster: c, Command: r.command(c)}
	cf := genericclioptions.NewConfigFlags(true)
	fs := pflag.NewFlagSet("probe", pflag.ContinueOnError)
	cf.AddFlags(fs)
	if err := fs.Parse(append(append([]string{}, r.conn...), clusterArgs(c)...)); err != nil {
		row.State, row.ExitCode, row.Error = fleet.StateFailed, ExitUsage, err.Error()
		return row
	}
	cfg, err := cf.ToRESTConfig()
	if err != nil {
		row.State, row.ExitCode, row.Error = fleet.StateFailed, ExitUsage, "cannot load the kubeconfig: "+err.Error()
		return row
	}
	row.Server = cfg.Host
	cfg.UserAgent = "kubectl-crdver/" + buildinfo.Version
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		row.State, row.ExitCode, row.Error = fleet.StateFailed, ExitUnavailable, err.Error()
		return row
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	body, err := kc.Discovery().RESTClient().Get().AbsPath("/version").Do(pctx).Raw()
	var info apimachineryversion.Info
	if err == nil {
		err = json.Unmarshal(body, &info)
	}
	if err != nil {
		row.State, row.ExitCode = fleet.StateFailed, ExitUnavailable
		if unreachable(err) {
			row.State = fleet.StateUnreachable
		}
		row.Error = clusterError("reading the server's version", err).Error()
		return row
	}
	row.KubernetesVersion = info.GitVersion
	if v, err := kubeversion.FromInfo(&info); err == nil && !strings.HasPrefix(info.GitVersion, "v"+v.String()+".") {
		row.KubernetesVersion = "v" + v.String() // a build from source says v0.0.0-master: its major and minor say more
	}
	if ns, err := kc.CoreV1().Namespaces().Get(pctx, "kube-system", metav1.GetOptions{}); err == nil {
		row.ClusterID = string(ns.UID)
	}
	return row
}

// unreachable: err says the API server could not be reached (not that it answered no).
func unreachable(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err)
}

// run is a read-only command on c: the probe, `upgrade status` for a plan (whether the release
// is in place), then the command.
func (r *fleetRunner) run(ctx context.Context, c fleet.Cluster) fleet.Row {
	row := r.probe(ctx, c)
	if row.State != "" {
		return row
	}
	if r.statusArgs != nil {
		if st, ok := r.status(ctx, c); ok {
			row.InPlace = st.InPlace
		}
	}
	r.summarize(&row, r.kind, r.exec(ctx, r.args, c, r.operands...))
	return row
}

// status runs `upgrade status` of the release on c; ok when it answered.
func (r *fleetRunner) status(ctx context.Context, c fleet.Cluster) (fleet.Row, bool) {
	res := r.exec(ctx, r.statusArgs, c)
	var st fleet.Row
	r.summarize(&st, fleet.KindUpgradeStatus, res)
	return st, st.State == "" && st.InPlace != nil
}

// upgrade is the upgrade of c in a rollout: skipped when upgrade status finds the release in
// place (recognised from the cluster, not from a local file), refused while another run holds
// the CRDs, else the upgrade itself (--yes: the fleet asked once), its backup named after c.
func (r *fleetRunner) upgrade(ctx context.Context, c fleet.Cluster) fleet.Row {
	row := r.probe(ctx, c)
	if row.State != "" {
		return row
	}
	st, ok := r.status(ctx, c)
	switch {
	case !ok:
		row.State, row.ExitCode, row.Error = fleet.StateFailed, ExitUnavailable, "upgrade status: "+st.Error
		return row
	case st.Verdict == upgrade.NextNothing:
		row.State, row.ExitCode, row.InPlace, row.Verdict, row.Need = fleet.StateSkipped, 0, st.InPlace, "in place", fleet.NeedNothing
		return row
	case st.Verdict == upgrade.NextWait:
		row.State, row.ExitCode, row.Error = fleet.StateFailed, ExitUnavailable, "another run holds the release's CRDs ("+st.Blocker+"): run again once it ended"
		return row
	}
	args := append(append([]string{}, r.args...), "--yes", "--backup="+r.f.backupFile(c, r.stamp))
	r.summarize(&row, r.kind, r.exec(ctx, args, c, r.operands...))
	return row
}

// summarize reads a child's report into row; a report that cannot be read is the row's error.
func (r *fleetRunner) summarize(row *fleet.Row, kind fleet.Kind, res fleet.ExecResult) {
	row.Error = res.ErrorLine
	if row.Error == "" && res.Err != nil {
		row.Error = res.Err.Error()
	}
	if err := fleet.Summarize(row, kind, res.ExitCode, res.Stdout); err != nil {
		row.State, row.ExitCode, row.Error = fleet.StateFailed, ExitUnavailable, err.Error()
	}
}
