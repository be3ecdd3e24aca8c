package plugin

import (
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
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
	src.files, src.loaded = nil, nil
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
		return append(out, fieldPaths(crd, v, toComplete)...), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// fieldPaths completes a dotted field path in a version's schema: the children of the part
// before the last dot that start with what follows it. Lists and maps are transparent.
func fieldPaths(crd *apiextensionsv1.CustomResourceDefinition, version, toComplete string) []string {
	ver, err := crdinfo.Lookup(crd, version)
	if err != nil || ver.Schema == nil || ver.Schema.OpenAPIV3Schema == nil {
		return nil
	}
	node := ver.Schema.OpenAPIV3Schema
	parent, prefix := "", toComplete
	if i := strings.LastIndex(toComplete, "."); i >= 0 {
		parent, prefix = toComplete[:i+1], toComplete[i+1:]
		for _, seg := range strings.Split(toComplete[:i], ".") {
			child, ok := schemaElement(node).Properties[seg]
			if !ok {
				return nil
			}
			node = &child
		}
	}
	var out []string
	props := schemaElement(node).Properties
	if parent == "" && strings.HasPrefix("metadata", prefix) {
		out = append(out, "metadata") // ObjectMeta: explain CRD metadata
	}
	for name := range props {
		if strings.HasPrefix(name, prefix) && !(parent == "" && name == "metadata") {
			out = append(out, parent+name)
		}
	}
	sort.Strings(out)
	return out
}

// schemaElement looks through arrays and maps to the schema of their elements.
func schemaElement(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	for range 64 { // bounded: a schema nests lists of lists only so deep
		switch {
		case s.Items != nil && s.Items.Schema != nil:
			s = s.Items.Schema
		case len(s.Properties) == 0 && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
			s = s.AdditionalProperties.Schema
		default:
			return s
		}
	}
	return s
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
