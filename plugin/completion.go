package plugin

import (
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/explain"
)

// completionCRD resolves the CRD a command line names for shell completion: the first argument
// (or the only CRD of the files) from the -f/--crd-file files when given, else the cluster.
func (s *crdSource) completionCRD(cmd *cobra.Command, args []string) (*apiextensionsv1.CustomResourceDefinition, bool) {
	name := ""
	if len(args) > 0 {
		name = args[0]
	}
	// During completion cobra parses the flags twice, so slice flags hold every file twice.
	src := *s
	src.files, src.src, src.reported = nil, nil, false
	seen := map[string]bool{}
	for _, f := range s.files {
		if !seen[f] && f != "-" {
			seen[f] = true
			src.files = append(src.files, f)
		}
	}
	crd, _, err := src.crdOrPath(cmd.Context(), name, "")
	if err != nil {
		cobra.CompDebugln(err.Error(), true)
		return nil, false
	}
	return crd, true
}

// completeVersionsOf completes a version flag (--version, --can-remove, --to, --from) with the
// versions of the CRD on the command line, in priority order.
func completeVersionsOf(s *crdSource) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		crd, ok := s.completionCRD(cmd, args)
		if !ok {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, v := range crdinfo.VersionNames(crd) {
			if strings.HasPrefix(v, toComplete) {
				out = append(out, v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// registerVersionCompletion registers completeVersionsOf(s) for each of the named flags.
func registerVersionCompletion(cmd *cobra.Command, s *crdSource, flags ...string) {
	for _, f := range flags {
		if err := cmd.RegisterFlagCompletionFunc(f, completeVersionsOf(s)); err != nil {
			panic(err) // a programming error: the flag must be defined first
		}
	}
}

// completeExplainArgs completes explain's arguments: a CRD name, then field paths of that CRD
// (with -f holding one CRD, the first argument may already be the field path).
func completeExplainArgs(g *Globals, s *crdSource, version *string) cobra.CompletionFunc {
	names := completeCRDNames(g)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) >= 2 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		if len(args) == 0 && !s.offline() {
			return names(cmd, args, toComplete)
		}
		crd, ok := s.completionCRD(cmd, args)
		if !ok {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		if len(args) == 0 { // from files: the CRD's names or, for its only CRD, a field path
			if strings.HasPrefix(crd.Name, toComplete) {
				out = append(out, crd.Name)
			}
		}
		v := *version
		if v == "" {
			if v = crdinfo.PreferredVersion(crd); v == "" {
				v = crdinfo.StorageVersion(crd)
			}
		}
		return append(out, explain.FieldPaths(crd, v, toComplete)...), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// completeCRDThenVersion completes `CRD VERSION` arguments (retire).
func completeCRDThenVersion(g *Globals, s *crdSource) cobra.CompletionFunc {
	names, versions := completeCRDNames(g), completeVersionsOf(s)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			return names(cmd, args, toComplete)
		case 1:
			return versions(cmd, args, toComplete)
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}
