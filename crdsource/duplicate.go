package crdsource

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/manifest"
)

// DuplicateError is a CRD the input defines more than once: every command refuses it by this
// rule and in these words, naming every document that defines it when they are known.
type DuplicateError struct {
	Name  string
	Count int
	// Where are the documents that define it (manifest.Document.Where), in input order; empty
	// when not known.
	Where []string
	// Alias is the name asked for, when it matched Name by its plural, singular, short name or
	// kind.
	Alias string
	// Differently: the definitions differ (the same definition twice is not refused where
	// only group and kind matter: Resolver).
	Differently bool
}

func (e *DuplicateError) Error() string {
	var b strings.Builder
	if e.Alias != "" {
		fmt.Fprintf(&b, "%q matches %s, which is defined %d times", e.Alias, e.Name, e.Count)
	} else {
		fmt.Fprintf(&b, "%s is defined %d times", e.Name, e.Count)
	}
	if e.Differently {
		b.WriteString(", differently")
	}
	if len(e.Where) > 1 {
		fmt.Fprintf(&b, ", in %s", strings.Join(e.Where, " and "))
	}
	b.WriteString(": pass only one file that defines it")
	return b.String()
}

// duplicateIn is the first CRD by name that crds hold more than once, or nil; where names the
// document of each CRD ("" when not known).
func duplicateIn(crds []*apiextensionsv1.CustomResourceDefinition, where func(*apiextensionsv1.CustomResourceDefinition) string) *DuplicateError {
	byName := map[string][]*apiextensionsv1.CustomResourceDefinition{}
	var dup []string
	for _, c := range crds {
		if byName[c.Name] = append(byName[c.Name], c); len(byName[c.Name]) == 2 {
			dup = append(dup, c.Name)
		}
	}
	if len(dup) == 0 {
		return nil
	}
	sort.Strings(dup)
	return duplicate(dup[0], byName[dup[0]], where)
}

func duplicate(name string, defs []*apiextensionsv1.CustomResourceDefinition, where func(*apiextensionsv1.CustomResourceDefinition) string) *DuplicateError {
	e := &DuplicateError{Name: name, Count: len(defs)}
	for _, c := range defs {
		if w := where(c); w != "" {
			e.Where = append(e.Where, w)
		}
	}
	if len(e.Where) != e.Count {
		e.Where = nil
	}
	return e
}

// Release collects the CRDs of a release as plan and upgrade read it, a document at a time
// (Add): each CRD decoded (DecodeOne: not validated), a document that is not a CRD skipped and
// counted, a CRD defined a second time refused (a *DuplicateError in a *manifest.InputError).
type Release struct {
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Docs is the number of documents added, Skipped of those that are not CRDs; First is
	// the first of those (for NoCRDFound).
	Docs, Skipped int
	First         manifest.Document
	where         map[string]string
}

// Add takes the next document.
func (r *Release) Add(d manifest.Document) error {
	r.Docs++
	if !crdinfo.IsCRD(d.APIVersion, d.Kind) {
		if r.Skipped == 0 {
			r.First = d
		}
		r.Skipped++
		return nil
	}
	crd, err := DecodeOne(d)
	if err != nil {
		return err
	}
	if prev, ok := r.where[crd.Name]; ok {
		return &manifest.InputError{Err: &DuplicateError{Name: crd.Name, Count: 2, Where: []string{prev, d.Where()}}}
	}
	if r.where == nil {
		r.where = map[string]string{}
	}
	r.where[crd.Name] = d.Where()
	r.CRDs = append(r.CRDs, crd)
	return nil
}

// CRDsOf is the CRDs of docs read as a Release, and the number of other documents.
func CRDsOf(docs []manifest.Document) ([]*apiextensionsv1.CustomResourceDefinition, int, error) {
	var r Release
	for _, d := range docs {
		if err := r.Add(d); err != nil {
			return nil, 0, err
		}
	}
	return r.CRDs, r.Skipped, nil
}

// Duplicates refuses a CRD the files define more than once (a *DuplicateError in a
// *manifest.InputError, naming the documents); nil for the cluster, where names are unique.
func (s *Source) Duplicates(ctx context.Context) error {
	if !s.Offline() {
		return nil
	}
	crds, err := s.Load(ctx)
	if err != nil {
		return err
	}
	if e := duplicateIn(crds, s.whereOf); e != nil {
		return &manifest.InputError{Err: e}
	}
	return nil
}

// whereOf is the document of the files that defined crd ("" when it did not come from them).
func (s *Source) whereOf(crd *apiextensionsv1.CustomResourceDefinition) string { return s.where[crd] }

// located fills in the documents of a *DuplicateError of Match over the files' CRDs.
func (s *Source) located(err error) error {
	var de *DuplicateError
	if errors.As(err, &de) && de.Where == nil {
		var defs []*apiextensionsv1.CustomResourceDefinition
		for _, c := range s.loaded {
			if c.Name == de.Name {
				defs = append(defs, c)
			}
		}
		de.Where = duplicate(de.Name, defs, s.whereOf).Where
	}
	return err
}
