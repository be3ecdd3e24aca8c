package plugin

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/crdver/kubectl-crdver/kubeversion"
)

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
