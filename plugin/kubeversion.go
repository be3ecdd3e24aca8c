package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apimachineryversion "k8s.io/apimachinery/pkg/version"

	"github.com/crdver/kubectl-crdver/kubeversion"
)

// serverVersionTimeout bounds reading /version when the command could do without the cluster
// (preview with the CRDs in the input): an unreachable kubeconfig context must not hang it.
const serverVersionTimeout = 5 * time.Second

// kubeVersionFlag is --kube-version: the Kubernetes version whose API server the command's
// judgements are those of.
type kubeVersionFlag struct {
	value string
	v     kubeversion.Version
}

func addKubeVersionFlag(cmd *cobra.Command) *kubeVersionFlag {
	f := &kubeVersionFlag{}
	cmd.Flags().StringVar(&f.value, "kube-version", "", fmt.Sprintf(
		"Judge as this Kubernetes version's API server (MAJOR.MINOR, %s to %s): CEL libraries, formats, feature-gate defaults (default: the cluster's version when the command reads the cluster, else %s)",
		kubeversion.Oldest, kubeversion.Newest, kubeversion.Newest))
	_ = cmd.RegisterFlagCompletionFunc("kube-version", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for v := kubeversion.Newest; !v.Less(kubeversion.Oldest); v = v.AddMinor(-1) {
			out = append(out, v.String())
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	return f
}

// validate parses the flag (no I/O): a version older than the oldest supported is a usage
// error.
func (f *kubeVersionFlag) validate() error {
	if f.value == "" {
		return nil
	}
	v, err := kubeversion.Parse(f.value)
	if err != nil {
		return UsageErrorf("--kube-version: %v", err)
	}
	if _, err := kubeversion.Check(v); err != nil {
		return UsageErrorf("--kube-version %s: %v", f.value, err)
	}
	f.v = v
	return nil
}

// judgedAs is the Kubernetes version a run judges as, and what to say about it.
type judgedAs struct {
	// Version is the version asked for (the flag's or the cluster's; may be newer than known).
	Version kubeversion.Version
	// note says where the version comes from (printed after the output).
	note string
}

// String is the version the code runs as ("1.37").
func (j judgedAs) String() string { return kubeversion.Effective(j.Version).String() }

// resolve picks the version (--kube-version; else the cluster's when live; else the newest
// known) and makes the run judge as it (g.useKubeVersion). A cluster older
// than the oldest supported version is refused (exit 2); a newer one is judged as the newest
// known, with a warning on stderr. When live but the version cannot be read, the newest is
// used and the note says so; with mustRead the failure is an error instead.
func (f *kubeVersionFlag) resolve(ctx context.Context, g *Globals, live, mustRead bool) (judgedAs, error) {
	var j judgedAs
	switch {
	case !f.v.IsZero():
		j = judgedAs{Version: f.v, note: fmt.Sprintf("judged as Kubernetes %s (--kube-version)", kubeversion.Effective(f.v))}
	case live:
		v, git, err := g.serverVersion(ctx, !mustRead)
		if err != nil {
			if mustRead {
				return j, err
			}
			j = judgedAs{Version: kubeversion.Newest, note: fmt.Sprintf("judged as Kubernetes %s, the newest known: the cluster's version could not be read (%v); choose with --kube-version", kubeversion.Newest, err)}
			break
		}
		if _, err := kubeversion.Check(v); err != nil {
			return j, UsageErrorf("the cluster runs %s: %v", git, err)
		}
		j = judgedAs{Version: v, note: fmt.Sprintf("judged as Kubernetes %s, the cluster's version (%s)", kubeversion.Effective(v), git)}
	default:
		j = judgedAs{Version: kubeversion.Newest, note: fmt.Sprintf("judged as Kubernetes %s, the newest known; choose the cluster's with --kube-version", kubeversion.Newest)}
	}
	if w, _ := kubeversion.Check(j.Version); w != "" {
		fmt.Fprintf(g.ErrOut, "warning: %s\n", w)
	}
	if err := g.useKubeVersion(j.Version); err != nil {
		return j, err
	}
	return j, nil
}

// use makes the run judge as --kube-version, when it is given (commands that read CRD files
// with it but judge nothing else: explain, versions, convert's files).
func (f *kubeVersionFlag) use(g *Globals) error {
	if f == nil || f.v.IsZero() {
		return nil
	}
	return g.useKubeVersion(f.v)
}

// printNote writes the note after the command's output.
func (j judgedAs) printNote(w io.Writer) {
	if j.note != "" {
		fmt.Fprintf(w, "note: %s\n", j.note)
	}
}

// serverVersion reads the API server's /version once per run (discovery's ServerVersion, with
// the run's context). bounded limits the wait (the command can do without the cluster).
func (g *Globals) serverVersion(ctx context.Context, bounded bool) (kubeversion.Version, string, error) {
	cs, err := g.clients()
	if err != nil {
		return kubeversion.Version{}, "", err
	}
	return cs.serverVersion(ctx, bounded)
}

func (c *clientSet) serverVersion(ctx context.Context, bounded bool) (kubeversion.Version, string, error) {
	c.mu.Lock()
	done, info, err := c.versionRead, c.version, c.versionErr
	c.mu.Unlock()
	if !done {
		d, derr := c.Discovery()
		if derr != nil {
			return kubeversion.Version{}, "", derr
		}
		rctx := ctx
		if bounded {
			var cancel context.CancelFunc
			rctx, cancel = context.WithTimeout(ctx, serverVersionTimeout)
			defer cancel()
		}
		// discovery.ServerVersion without a context: the same GET /version.
		var body []byte
		body, err = d.RESTClient().Get().AbsPath("/version").Do(rctx).Raw()
		info = &apimachineryversion.Info{}
		if err == nil {
			err = json.Unmarshal(body, info)
		}
		if err != nil {
			err = clusterError("reading the server's version", err)
		}
		if ctx.Err() == nil {
			c.mu.Lock()
			c.versionRead, c.version, c.versionErr = true, info, err
			c.mu.Unlock()
		}
	}
	if err != nil {
		return kubeversion.Version{}, "", err
	}
	v, perr := kubeversion.FromInfo(info)
	if perr != nil {
		return kubeversion.Version{}, "", Unavailable(perr)
	}
	git := info.GitVersion
	if git == "" {
		git = v.String()
	}
	return v, git, nil
}
