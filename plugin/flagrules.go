package plugin

import (
	"encoding/json"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/manifest"
)

// Rules about flags that several commands share (DESIGN.md "Flags — one meaning per flag
// across commands").

// stdinOnce refuses "-" in both -f and the CRD file flag: standard input can be read once.
func stdinOnce(objects []string, crds *crdSource) error {
	if hasStdin(objects) && hasStdin(crds.files) {
		return UsageErrorf("-f - and --%s - both read standard input, which can be read only once: give one of them as a file", crds.flag)
	}
	return nil
}

func hasStdin(paths []string) bool {
	for _, p := range paths {
		if p == "-" {
			return true
		}
	}
	return false
}

// aliasFlag makes --alias another spelling of --name on cmd (an older name kept working). The
// alias is not listed in --help.
func aliasFlag(cmd *cobra.Command, alias, name string) {
	next := cmd.Flags().GetNormalizeFunc()
	cmd.Flags().SetNormalizeFunc(func(f *pflag.FlagSet, n string) pflag.NormalizedName {
		if n == alias {
			n = name
		}
		return next(f, n)
	})
}

// flagNotesToStderr sends pflag's notes (a deprecated flag or shorthand was used) to stderr:
// cobra would print them on the command's output, mixed with the report.
func flagNotesToStderr(cmd *cobra.Command, w io.Writer) {
	cmd.Flags().SetOutput(w)
	for _, c := range cmd.Commands() {
		flagNotesToStderr(c, w)
	}
}

// duplicateCRDs refuses CRDs defined more than once in the files of s (one rule for every way
// of reading them: versions -f DIR NAME refuses too), naming where each definition is.
func duplicateCRDs(s *crdSource, crds []*apiextensionsv1.CustomResourceDefinition) error {
	count := map[string]int{}
	var dup []string
	for _, c := range crds {
		if count[c.Name]++; count[c.Name] == 2 {
			dup = append(dup, c.Name)
		}
	}
	if len(dup) == 0 {
		return nil
	}
	sort.Strings(dup)
	name := dup[0]
	where := definedAt(s, name)
	if len(where) < 2 {
		return UsageErrorf("%s is defined %d times in the input: pass only one file that defines it", name, count[name])
	}
	return UsageErrorf("%s is defined %d times, in %s: pass only one file that defines it", name, count[name], strings.Join(where, " and "))
}

// definedAt lists where the files of s define the CRD called name, by reading them again (only
// on this error path; standard input cannot be read again, so nothing is listed for it).
func definedAt(s *crdSource, name string) []string {
	for _, f := range s.files {
		if expanded, err := manifest.ExpandPath(f, false); err != nil || manifest.Size(expanded) < 0 {
			return nil // stdin, a URL or a pipe: it cannot be read again
		}
	}
	docs, err := ReadDocuments(s.files, nil)
	if err != nil {
		return nil
	}
	var where []string
	for _, d := range docs {
		var head struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if json.Unmarshal(d.JSON, &head) == nil && head.Metadata.Name == name {
			where = append(where, d.Where())
		}
	}
	return where
}
