// Command scan-type-changes compares the CustomResourceDefinitions of two releases of a
// project and lists, per CRD, the fields whose type or shape differs between the old
// release's storage version and the new release's storage version (the same field path):
// string ↔ object, scalar ↔ list, integer → string, list ↔ map, a list-type or map-type
// change, int-or-string narrowed. Those are the values kubectl crdver's plan calls a
// type-mismatch when objects hold them (docs/decision-table.md). It is how the release of
// testdata/releases/opentelemetry-operator was found, and how the projects listed in
// testdata/releases/SOURCES.md were scanned.
//
//	go run ./hack/scan-type-changes OLD NEW
//	go run ./hack/scan-type-changes -git /work/.mirror/OWNER+NAME/repo -path config/crd/bases TAG1 TAG2 [TAG3 …]
//
// OLD and NEW are files or folders of YAML (every CRD document in them, v1 or v1beta1); with
// -git they are tags (or commits) of that git directory, read with git show (every .yaml/.yml
// file under -path, which may be given more than once), and each consecutive pair is compared.
// Exit status: 0 no change of type, 1 at least one, 2 bad input.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

type paths []string

func (p *paths) String() string     { return strings.Join(*p, ",") }
func (p *paths) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	gitDir := flag.String("git", "", "a git directory: the arguments are its tags or commits")
	var under paths
	flag.Var(&under, "path", "with -git: a folder or file holding the CRDs (repeatable)")
	flag.Parse()
	args := flag.Args()
	if len(args) < 2 || (*gitDir == "" && len(args) != 2) || (*gitDir != "" && len(under) == 0) {
		fmt.Fprintln(os.Stderr, "usage: scan-type-changes OLD NEW | -git DIR -path P REV1 REV2 [REV3 …]")
		os.Exit(2)
	}
	found := false
	for i := 0; i+1 < len(args); i++ {
		var old, next map[string]*apiextensionsv1.CustomResourceDefinition
		var err error
		if *gitDir != "" {
			old, err = fromGit(*gitDir, args[i], under)
			if err == nil {
				next, err = fromGit(*gitDir, args[i+1], under)
			}
		} else {
			old, err = fromFiles(args[0])
			if err == nil {
				next, err = fromFiles(args[1])
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "scan-type-changes:", err)
			os.Exit(2)
		}
		if report(os.Stdout, args[i], args[i+1], old, next) {
			found = true
		}
	}
	if found {
		os.Exit(1)
	}
}

// decodeAll adds every CRD document of b to out.
func decodeAll(b []byte, where string, out map[string]*apiextensionsv1.CustomResourceDefinition) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if !bytes.Contains(doc, []byte("CustomResourceDefinition")) || bytes.Contains(doc, []byte("{{")) {
			continue
		}
		crd, err := crdinfo.Decode(doc)
		if err != nil || crd.Name == "" || len(crd.Spec.Versions) == 0 {
			continue // not a CRD (or not one this can read): skipped
		}
		out[crd.Name] = crd
	}
}

func fromFiles(root string) (map[string]*apiextensionsv1.CustomResourceDefinition, error) {
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isYAML(p) {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return decodeAll(b, p, out)
	})
	return out, err
}

func fromGit(dir, rev string, under []string) (map[string]*apiextensionsv1.CustomResourceDefinition, error) {
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	ls, err := exec.Command("git", append([]string{"--git-dir", dir, "ls-tree", "-r", "--name-only", rev, "--"}, under...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-tree %s: %w", rev, err)
	}
	for _, f := range strings.Fields(string(ls)) {
		if !isYAML(f) {
			continue
		}
		b, err := exec.Command("git", "--git-dir", dir, "show", rev+":"+f).Output()
		if err != nil {
			return nil, fmt.Errorf("git show %s:%s: %w", rev, f, err)
		}
		if err := decodeAll(b, rev+":"+f, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func isYAML(p string) bool {
	e := filepath.Ext(p)
	return e == ".yaml" || e == ".yml"
}

// shape is one schema node's type as server-side apply and validation see it.
type shape struct {
	typ      string // string, integer, number, boolean, object, map, array, int-or-string, any
	listType string // array: atomic (default), set, map
	listKeys string
	mapType  string // object/map: granular (default), atomic
}

func (s shape) String() string {
	out := s.typ
	if s.typ == "array" {
		out += "(" + s.listType
		if s.listKeys != "" {
			out += " keys " + s.listKeys
		}
		out += ")"
	}
	if s.mapType == "atomic" {
		out += "(atomic)"
	}
	return out
}

func shapeOf(p *apiextensionsv1.JSONSchemaProps) shape {
	s := shape{typ: p.Type}
	switch {
	case p.XIntOrString:
		s.typ = "int-or-string"
	case p.Type == "":
		s.typ = "any"
	case p.Type == "object" && p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil && len(p.Properties) == 0:
		s.typ = "map"
	}
	if s.typ == "array" {
		s.listType = "atomic"
	}
	if p.XListType != nil {
		s.listType = *p.XListType
	}
	if len(p.XListMapKeys) > 0 {
		s.listKeys = strings.Join(p.XListMapKeys, ",")
	}
	if p.XMapType != nil && *p.XMapType == "atomic" {
		s.mapType = "atomic"
	}
	return s
}

// fits reports whether every value of old's shape is a value of next's (then a stored value
// types under the new schema); false for a change of list or map type too (the typed object
// and its field ownership change).
func fits(old, next shape) bool {
	if next.typ == "any" {
		return true
	}
	if old == next {
		return true
	}
	switch {
	case old.typ == next.typ && old.typ == "array":
		return false
	case (old.typ == "object" || old.typ == "map") && (next.typ == "object" || next.typ == "map") && old.mapType == next.mapType:
		return true
	case old.typ == "integer" && (next.typ == "number" || next.typ == "int-or-string"):
		return true
	case old.typ == "string" && next.typ == "int-or-string":
		return true
	}
	return false
}

type change struct {
	path      string
	old, next shape
}

// walk compares old and next at path, and below it.
func walk(path string, old, next *apiextensionsv1.JSONSchemaProps, out *[]change) {
	if old == nil || next == nil {
		return
	}
	so, sn := shapeOf(old), shapeOf(next)
	if !fits(so, sn) {
		*out = append(*out, change{path, so, sn})
	}
	keys := make([]string, 0, len(old.Properties))
	for k := range old.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if n, ok := next.Properties[k]; ok {
			o := old.Properties[k]
			walk(path+"."+k, &o, &n, out)
		}
	}
	if ap := old.AdditionalProperties; ap != nil && ap.Schema != nil {
		if nap := next.AdditionalProperties; nap != nil && nap.Schema != nil {
			walk(path+".*", ap.Schema, nap.Schema, out)
		}
	}
	if old.Items != nil && old.Items.Schema != nil && next.Items != nil && next.Items.Schema != nil {
		walk(path+"[]", old.Items.Schema, next.Items.Schema, out)
	}
}

func schemaOf(crd *apiextensionsv1.CustomResourceDefinition, v string) *apiextensionsv1.JSONSchemaProps {
	for _, ver := range crd.Spec.Versions {
		if ver.Name == v && ver.Schema != nil {
			return ver.Schema.OpenAPIV3Schema
		}
	}
	return nil
}

// report prints the changes of type between old's and next's storage versions, per CRD in
// both; it reports whether there was one.
func report(w io.Writer, oldName, nextName string, old, next map[string]*apiextensionsv1.CustomResourceDefinition) bool {
	var names []string
	for n := range old {
		if _, ok := next[n]; ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	fmt.Fprintf(w, "# %s -> %s: %d CRDs in both (%d, %d)\n", oldName, nextName, len(names), len(old), len(next))
	found := false
	for _, n := range names {
		so, sn := crdinfo.StorageVersion(old[n]), crdinfo.StorageVersion(next[n])
		var changes []change
		walk("", schemaOf(old[n], so), schemaOf(next[n], sn), &changes)
		if len(changes) == 0 {
			continue
		}
		found = true
		strategy := "None"
		if c := next[n].Spec.Conversion; c != nil && c.Strategy != "" {
			strategy = string(c.Strategy)
		}
		fmt.Fprintf(w, "%s: storage %s -> %s (conversion %s; %s served: %v)\n", n, so, sn, strategy, so, crdinfo.IsServed(next[n], so))
		for _, c := range changes {
			p := c.path
			if p == "" {
				p = "."
			}
			what := "type"
			switch {
			case c.old.typ == "array" && c.next.typ == "array":
				what = "list type: the values fit when their keys are present and unique"
			case (c.old.typ == "object" || c.old.typ == "map") && (c.next.typ == "object" || c.next.typ == "map"):
				what = "map type: the values fit, field ownership changes"
			}
			fmt.Fprintf(w, "  %s: %s -> %s [%s]\n", strings.TrimPrefix(p, "."), c.old, c.next, what)
		}
	}
	return found
}
