package plugin

// convert_source.go: where convert's objects come from (-f, --generate, --from-cluster), read
// a page at a time, and --keep, written a page at a time.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/manifest"
)

// convertSource is the source of a run's objects, with what the run says of it afterwards.
type convertSource struct {
	convert.Source
	// close releases the input (a no-op but for files).
	close func()
	// none is the error of a run that found no object at all (nil: an empty run is fine).
	none func() error
	// notes say where the objects came from, once the run is over.
	notes func(*convert.Report) []string
}

// Total is the number of objects the source will give, when it knows it (0: unknown).
func (s *convertSource) Total() int {
	if t, ok := s.Source.(interface{ Total() int }); ok {
		return t.Total()
	}
	return 0
}

// objects is the source of the objects to convert, read a page at a time: the documents of
// -f (each input read once, a pipe included), the generator of --generate, or the cluster's
// objects (--from-cluster).
func (o *ConvertOptions) objects(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (*convertSource, error) {
	switch {
	case len(o.Files) > 0:
		docs := manifest.Open(ctx, o.Files, InputOptions{Stdin: o.g.In})
		return &convertSource{
			Source: convert.NewDocumentSource(docs, inputPage*max(o.BatchSize, 1)),
			close:  docs.Close,
			none: func() error {
				return UsageErrorf("%s: no objects found", strings.Join(o.Files, ", "))
			},
			notes: func(*convert.Report) []string { return nil },
		}, nil
	case o.Generate > 0:
		ns, err := o.namespaceOrDefault()
		if err != nil {
			return nil, err
		}
		g, err := convert.NewGenerator(crd, convert.GenerateOptions{Version: o.From, Count: o.Generate, Seed: o.Seed, Namespace: ns})
		if err != nil {
			return nil, Usage(err)
		}
		g.PageSize = inputPage * max(o.BatchSize, 1)
		return &convertSource{Source: g, close: func() {},
			none: func() error {
				return Usage(fmt.Errorf("%s: none of the %d generated object(s) is valid in %s: nothing to convert", crd.Name, o.Generate, o.From))
			},
			notes: func(*convert.Report) []string { return o.generatedNotes(g) },
		}, nil
	}
	dyn, ns, err := o.dynamic()
	if err != nil {
		return nil, err
	}
	cs := convert.NewClusterSource(dyn, crd, o.From, o.selection(ns))
	return &convertSource{Source: cs, close: func() {}, none: func() error { return nil },
		notes: func(*convert.Report) []string { return []string{o.clusterNote(cs)} }}, nil
}

// generatedNotes say how many objects --generate made, and what it repaired or dropped.
func (o *ConvertOptions) generatedNotes(g *convert.Generator) []string {
	notes := []string{fmt.Sprintf("%d object(s) generated from the %s schema with seed %d (--seed %d reproduces them), each accepted by the API server's create path", g.Generated, o.From, o.Seed, o.Seed)}
	if g.Repaired > 0 {
		notes = append(notes, fmt.Sprintf("%d generated object(s) were repaired (optional fields the API server rejected were dropped)", g.Repaired))
	}
	if g.Dropped > 0 {
		notes = append(notes, fmt.Sprintf("%d generated object(s) dropped: the API server still rejected them in %s after %d attempts (constraints the generator cannot satisfy)", g.Dropped, o.From, convert.GenerateAttempts))
	}
	return notes
}

// keepFile is --keep: the objects that reproduce the failures, written as a multi-document
// YAML file a page at a time (created with the first one; none when nothing failed).
type keepFile struct {
	path string
	f    *os.File
	w    *bufio.Writer
	n    int
}

// add writes a page's objects.
func (k *keepFile) add(objects []convert.FailedObject) error {
	if k.path == "" || len(objects) == 0 {
		return nil
	}
	if k.f == nil {
		f, err := os.Create(k.path)
		if err != nil {
			return Unavailable(fmt.Errorf("--keep: %w", err))
		}
		k.f, k.w = f, bufio.NewWriter(f)
	}
	for _, f := range objects {
		k.n++
		if f.Object == nil {
			fmt.Fprintf(k.w, "# %s (live object: get it with kubectl)\n---\n", f.Source)
			continue
		}
		y, err := yaml.Marshal(f.Object)
		if err != nil {
			return err
		}
		fmt.Fprintf(k.w, "# %s\n", f.Source)
		_, _ = k.w.Write(y)
		_, _ = k.w.WriteString("---\n")
	}
	return nil
}

// finish writes what the report still holds (a run that kept its failures: the API server's
// round trip of live objects), closes the file and notes it in the report.
func (k *keepFile) finish(report *convert.Report) error {
	if err := k.add(report.Keep()); err != nil {
		return err
	}
	if k.f == nil {
		return nil
	}
	err := k.w.Flush()
	if cerr := k.f.Close(); err == nil {
		err = cerr
	}
	k.f = nil
	if err != nil {
		return Unavailable(fmt.Errorf("--keep: %w", err))
	}
	what := "failing"
	if len(report.Bisections) > 0 {
		what = "failing (bisected)"
	}
	report.Notes = append(report.Notes, fmt.Sprintf("%d %s object(s) written to %s", k.n, what, k.path))
	return nil
}

// close closes the file of a run that ended early (what was written stays).
func (k *keepFile) close() {
	if k.f != nil {
		_ = k.w.Flush()
		_ = k.f.Close()
		k.f = nil
	}
}

// inputPage is the number of batches of a page of objects read from files, stdin or the
// generator: enough for the run's pipeline to prepare the next batches and check the last
// answers while a request is out (convert's pipeline works within a page).
const inputPage = 4
