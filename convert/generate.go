package convert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/preview"
)

// GenerateOptions tune Generate.
type GenerateOptions struct {
	// Version to generate objects in (a name in spec.versions).
	Version string
	// Count of objects.
	Count int
	// Seed: the same seed (with the same CRD) gives the same objects.
	Seed uint64
	// Namespace of namespaced objects ("default" when empty).
	Namespace string
}

// Generated is the result of Generate.
type Generated struct {
	// Objects are valid in the version: the API server's create path (explain's preview
	// engine: decoding with fieldValidation=Strict, pruning, defaulting, metadata, OpenAPI,
	// list types, CEL) accepts each of them.
	Objects []Object
	// Dropped counts objects left out because they were still rejected after
	// GenerateAttempts attempts of GenerateRepairs repairs each (e.g. a pattern, oneOf or CEL
	// rule the generator cannot satisfy and no optional field to drop).
	Dropped int
	// Repaired counts objects that were accepted only after optional fields named in the
	// rejection were dropped.
	Repaired int
}

// Bounds of the search for a valid object: fresh attempts, and repairs per attempt.
const (
	GenerateAttempts = 10
	GenerateRepairs  = 8
)

// profiles of the first objects, so that even a small --generate N covers the cases
// conversions get wrong; later objects mix them at random.
const (
	profileMinimal    = iota // only required fields
	profileZero              // every field present, with zero values: "", 0, false, [], {}
	profileFull              // every field set, lists and maps with one element
	profileSeparators        // strings holding : / , =
	profileRandom
)

// Generate synthesises objects valid for a version's structural schema: types, enums,
// formats, minimum/maximum, lengths, required fields and (where feasible) patterns, with the
// version's defaults applied as the API server would on create. It varies what conversions
// get wrong: optional fields omitted, present but empty, or set; strings with separators;
// empty and one-element lists and maps; zero values. Each object is checked with the API
// server's create path (preview.Previewer); a rejected one is repaired by dropping the
// optional fields the errors name, or generated again, within bounds; what stays rejected is
// dropped and counted.
func Generate(crd *apiextensionsv1.CustomResourceDefinition, opts GenerateOptions) (*Generated, error) {
	return GenerateContext(context.Background(), crd, opts)
}

// GenerateContext is Generate with a context: it stops with ctx's error when ctx is done.
func GenerateContext(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts GenerateOptions) (*Generated, error) {
	g, err := NewGenerator(crd, opts)
	if err != nil {
		return nil, err
	}
	out := &Generated{}
	for {
		page, err := g.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		out.Objects = append(out.Objects, page...)
	}
	out.Dropped, out.Repaired = g.Dropped, g.Repaired
	return out, nil
}

// Generator synthesises Generate's objects a page at a time: a Source whose memory holds one
// page, whatever the count. The same options give the same objects as Generate.
type Generator struct {
	crd       *apiextensionsv1.CustomResourceDefinition
	opts      GenerateOptions
	vs        *versionSchema
	previewer *preview.Previewer
	ns        string
	next      int
	// PageSize is the number of objects per page (0: DefaultPageSize).
	PageSize int
	// Generated, Dropped and Repaired count the objects so far, as Generated's fields.
	Generated, Dropped, Repaired int
}

// NewGenerator prepares the generation of opts.Count objects of crd at opts.Version.
func NewGenerator(crd *apiextensionsv1.CustomResourceDefinition, opts GenerateOptions) (*Generator, error) {
	vs, err := newVersionSchema(crd, opts.Version)
	if err != nil {
		return nil, err
	}
	if vs.structural == nil {
		return nil, fmt.Errorf("%s: version %q has no schema to generate objects from", crd.Name, opts.Version)
	}
	previewer, err := preview.NewPreviewer(crd)
	if err != nil {
		return nil, err
	}
	ns := opts.Namespace
	if ns == "" {
		ns = "default"
	}
	return &Generator{crd: crd, opts: opts, vs: vs, previewer: previewer, ns: ns}, nil
}

// Total is the number of objects asked for (those dropped are not generated).
func (g *Generator) Total() int { return g.opts.Count }

// Next generates the next page; io.EOF once Count objects were tried. It stops with ctx's
// error when ctx is done.
func (g *Generator) Next(ctx context.Context) ([]Object, error) {
	size := g.PageSize
	if size <= 0 {
		size = DefaultPageSize
	}
	var page []Object
	for ; g.next < g.opts.Count && len(page) < size; g.next++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		obj, accepted, repaired, err := g.one(ctx, g.next)
		if err != nil {
			return nil, err
		}
		if !accepted {
			g.Dropped++
			continue
		}
		if repaired {
			g.Repaired++
		}
		g.Generated++
		page = append(page, Object{Source: fmt.Sprintf("generated #%d (seed %d)", g.next, g.opts.Seed), Object: obj})
	}
	if len(page) == 0 {
		return nil, io.EOF
	}
	return page, nil
}

// one generates object i: accepted by the API server's create path, after repairs or not.
func (g *Generator) one(ctx context.Context, i int) (obj map[string]any, accepted, repaired bool, err error) {
	crd, opts, vs := g.crd, g.opts, g.vs
	profile := min(i, profileRandom)
	for attempt := 0; attempt < GenerateAttempts && !accepted; attempt++ {
		gen := &generator{rng: rand.New(rand.NewPCG(opts.Seed, uint64(i)<<8|uint64(attempt))), profile: profile}
		obj = gen.root(vs.structural)
		obj["apiVersion"] = crd.Spec.Group + "/" + opts.Version
		obj["kind"] = crd.Spec.Names.Kind
		meta := map[string]any{
			"name":   fmt.Sprintf("generated-%d-%04d", opts.Seed, i),
			"uid":    fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(opts.Seed), i),
			"labels": map[string]any{"crdver.io/generated": "true"},
		}
		if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
			meta["namespace"] = g.ns
		}
		obj["metadata"] = meta
		vs.defaultObject(obj)
		for repair := 0; repair <= GenerateRepairs; repair++ {
			errs, err := previewErrors(ctx, g.previewer, obj, g.ns)
			if err != nil {
				return nil, false, false, fmt.Errorf("%s: checking generated object %d: %w", crd.Name, i, err)
			}
			if len(errs) == 0 {
				accepted = true
				break
			}
			if repair == GenerateRepairs || !repairObject(obj, vs.structural, errs) {
				break
			}
			repaired = true
			vs.defaultObject(obj)
		}
	}
	return obj, accepted, repaired, nil
}

// previewErrors runs the API server's create path on obj (a strict create, as kubectl sends
// it) and returns the errors of a rejection.
func previewErrors(ctx context.Context, p *preview.Previewer, obj map[string]any, ns string) ([]preview.PreviewError, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	res, err := p.Create(ctx, raw, preview.PreviewOptions{FieldValidation: preview.FieldValidationStrict, Namespace: ns})
	if err != nil {
		return nil, err
	}
	if res.Accepted() {
		return nil, nil
	}
	if len(res.Errors) == 0 {
		return []preview.PreviewError{{Message: "rejected"}}, nil
	}
	return res.Errors, nil
}
