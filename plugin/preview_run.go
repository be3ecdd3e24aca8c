package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/preview"
)

// Run previews every object of the input, streaming: documents are read one at a time,
// previewed by --workers workers, and printed in the input's order as soon as they are done.
func (o *PreviewOptions) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	olds, err := o.readOld(ctx)
	if err != nil {
		return err
	}
	ns, err := o.g.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	res, err := o.newResolver(ctx)
	if err != nil {
		return err
	}
	progress := &InputProgress{}
	var objects atomic.Int64
	stopProgress := startInputProgress(o.progress.toProgress(o.g.ErrOut), o.Files, o.input.Recursive, progress, &objects)
	defer stopProgress()

	out := newPreviewOutput(o)
	pool := newPreviewPool(ctx, o, ns, olds, out)
	skipped := &skipList{what: "no CustomResourceDefinition in the input or the cluster defines their kind", one: "is not defined by any CustomResourceDefinition in the input or the cluster"}
	switch {
	case o.CRDName != "":
		skipped.what = "not of CustomResourceDefinition " + o.CRDName
		skipped.one = "does not belong to CustomResourceDefinition " + o.CRDName
	case o.source.offline():
		skipped.what = "no CustomResourceDefinition of --crd-file or the input defines their kind"
		skipped.one = "is not defined by any CustomResourceDefinition of --crd-file or the input"
	}
	crdsInInput := 0
	readErr := EachDocument(ctx, o.Files, InputOptions{Stdin: o.g.In, Recursive: o.input.Recursive, Progress: progress}, func(d Document) error {
		if crdinfo.IsCRD(d.APIVersion, d.Kind) {
			crdsInInput++
			if res.prescanned[d.Where()] {
				return nil
			}
			crd, err := decodeCRD(ctx, d, o.verboseOut())
			if err != nil {
				return err
			}
			return res.addInput(d, crd)
		}
		gv, err := schema.ParseGroupVersion(d.APIVersion)
		if err != nil || d.Kind == "" || gv.Version == "" {
			return UsageErrorf("%s: not a Kubernetes object: it needs apiVersion (group/version) and kind", d.Where())
		}
		crd, err := res.find(ctx, d, gv)
		if err != nil {
			return err
		}
		if crd == nil {
			if o.input.StrictKinds {
				return res.unmatchedError(d)
			}
			skipped.add(d)
			return nil
		}
		objects.Add(1)
		return pool.submit(d, crd)
	})
	poolErr := pool.finish()
	stopProgress()
	switch {
	case ctx.Err() != nil:
		return Unavailable(fmt.Errorf("interrupted after %s: the output is incomplete", plural(pool.total(), "object")))
	case poolErr != nil:
		return poolErr
	case readErr != nil:
		return readErr
	}
	if pool.total() == 0 {
		if skipped.n == 0 && crdsInInput > 0 {
			return UsageErrorf("%s: only CustomResourceDefinitions, no objects to preview", strings.Join(o.Files, ", "))
		}
		if skipped.n == 0 {
			return UsageErrorf("%s: no objects found", strings.Join(o.Files, ", "))
		}
		return UsageErrorf("nothing to preview: %s skipped; the first: %s (give the CRD with --crd-file, or put it in the input before the objects)",
			plural(skipped.n, "document"), skipped.firstWhy)
	}
	if err := out.finish(pool.accepted, pool.rejected, skipped.n); err != nil {
		return err
	}
	if err := skipped.report(o.g.ErrOut, o.input.Verbose); err != nil {
		return err
	}
	if pool.rejected > 0 {
		return ProblemsFound("%d of %s would be rejected by the API server", pool.rejected, plural(pool.total(), "object"))
	}
	return nil
}

func (o *PreviewOptions) verboseOut() io.Writer {
	if o.input.Verbose {
		return o.g.ErrOut
	}
	return nil
}

// previewResolver finds the CRD of each object: the CRD named on the command line, the CRDs of
// --crd-file and of the input itself, or (with neither a name nor --crd-file) the cluster's.
type previewResolver struct {
	o     *PreviewOptions
	named *apiextensionsv1.CustomResourceDefinition
	local map[gkKey]localCRD
	// cluster is every CRD of the cluster, listed once, on the first object no local CRD
	// defines; nil until then.
	cluster map[gkKey]*apiextensionsv1.CustomResourceDefinition
	// prescanned names the CRD documents of the input files read before the objects.
	prescanned map[string]bool
}

type localCRD struct {
	crd   *apiextensionsv1.CustomResourceDefinition
	where string
}

func (o *PreviewOptions) newResolver(ctx context.Context) (*previewResolver, error) {
	r := &previewResolver{o: o, local: map[gkKey]localCRD{}, prescanned: map[string]bool{}}
	if o.CRDName != "" {
		crd, err := o.source.one(ctx, o.CRDName)
		if err != nil {
			return nil, err
		}
		r.named = crd
		return r, nil
	}
	if o.source.offline() {
		crds, err := o.source.load(ctx)
		if err != nil {
			return nil, err
		}
		for _, crd := range crds {
			if err := r.add(crd, "--crd-file "+strings.Join(o.source.files, ",")); err != nil {
				return nil, err
			}
		}
	}
	return r, r.prescan(ctx)
}

// prescan reads the CRDs of the input files (not stdin or URLs, which can be read once)
// before their objects, so that a CRD used by objects before it in the files (a directory
// read in name order) is found. In stdin and URLs, CRDs must come first, as helm template and
// kustomize build print them.
func (r *previewResolver) prescan(ctx context.Context) error {
	if r.named != nil {
		return nil
	}
	var files []string
	for _, f := range r.o.Files {
		if f != "-" && !isURL(f) {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil
	}
	opts := InputOptions{Recursive: r.o.input.Recursive, Prefilter: []byte("CustomResourceDefinition")}
	return EachDocument(ctx, files, opts, func(d Document) error {
		if !crdinfo.IsCRD(d.APIVersion, d.Kind) {
			return nil
		}
		crd, err := decodeCRD(ctx, d, r.o.verboseOut())
		if err != nil {
			return err
		}
		r.prescanned[d.Where()] = true
		return r.addInput(d, crd)
	})
}

func (r *previewResolver) add(crd *apiextensionsv1.CustomResourceDefinition, where string) error {
	key := gkKey{crd.Spec.Group, crd.Spec.Names.Kind}
	if prev, ok := r.local[key]; ok {
		if apiequality.Semantic.DeepEqual(prev.crd.Spec, crd.Spec) {
			return nil
		}
		return UsageErrorf("%s %s is defined twice, differently: in %s and in %s; pass only one", crd.Spec.Group, crd.Spec.Names.Kind, prev.where, where)
	}
	r.local[key] = localCRD{crd: crd, where: where}
	return nil
}

// addInput takes a CRD found among the objects: it is used for the objects after it.
func (r *previewResolver) addInput(d Document, crd *apiextensionsv1.CustomResourceDefinition) error {
	if r.named != nil {
		return nil // the named CRD is the only one used
	}
	return r.add(crd, d.Where())
}

// find returns the CRD that defines d's kind, or nil when none does.
func (r *previewResolver) find(ctx context.Context, d Document, gv schema.GroupVersion) (*apiextensionsv1.CustomResourceDefinition, error) {
	key := gkKey{gv.Group, d.Kind}
	if r.named != nil {
		if r.named.Spec.Group == gv.Group && r.named.Spec.Names.Kind == d.Kind {
			return r.named, nil
		}
		return nil, nil
	}
	if c, ok := r.local[key]; ok {
		return c.crd, nil
	}
	if r.o.source.offline() || builtIn(gv.WithKind(d.Kind)) {
		return nil, nil
	}
	if r.cluster == nil {
		crds, err := r.o.source.all(ctx)
		if err != nil {
			var ee *ExitError
			if errors.As(err, &ee) && ee.Code == ExitUnavailable {
				return nil, Unavailable(fmt.Errorf("%s: %s %s: no CustomResourceDefinition for it in the input, and %w; give the CRDs with --crd-file (or in the input, before the objects) to work offline",
					d.Where(), d.APIVersion, d.Kind, err))
			}
			return nil, err
		}
		r.cluster = map[gkKey]*apiextensionsv1.CustomResourceDefinition{}
		for _, c := range crds {
			r.cluster[gkKey{c.Spec.Group, c.Spec.Names.Kind}] = c
		}
	}
	return r.cluster[key], nil
}

// builtIn reports whether gvk can never be a custom resource: a kind the API server has
// built in, or a group without a dot (a CRD's group must have one).
func builtIn(gvk schema.GroupVersionKind) bool {
	return !strings.Contains(gvk.Group, ".") || clientgoscheme.Scheme.Recognizes(gvk)
}

func (r *previewResolver) unmatchedError(d Document) error {
	switch {
	case r.named != nil:
		return UsageErrorf("%s: %s %s does not belong to CustomResourceDefinition %s (group %s, kind %s; --strict-kinds)",
			d.Where(), d.APIVersion, d.Kind, r.named.Name, r.named.Spec.Group, r.named.Spec.Names.Kind)
	case r.o.source.offline():
		var have []*apiextensionsv1.CustomResourceDefinition
		for _, c := range r.local {
			have = append(have, c.crd)
		}
		return UsageErrorf("%s: no CustomResourceDefinition in %s or in the input defines %s %s (have: %s; --strict-kinds)",
			d.Where(), strings.Join(r.o.source.files, ", "), d.APIVersion, d.Kind, strings.Join(crdNames(have), ", "))
	}
	return UsageErrorf("%s: no CustomResourceDefinition defines %s %s, in the input or in the cluster (--strict-kinds)", d.Where(), d.APIVersion, d.Kind)
}

// previewPool previews objects on several workers and hands the results to the output in the
// input's order. At most a few objects per worker are in flight: memory stays bounded.
type previewPool struct {
	ctx    context.Context
	o      *PreviewOptions
	ns     string
	olds   map[oldKey][]byte
	out    *previewOutput
	jobs   chan previewJob
	window chan struct{}
	wg     sync.WaitGroup
	done   chan struct{}

	mu       sync.Mutex
	results  map[int]previewDone
	next     int
	seq      int
	err      error
	accepted int
	rejected int
}

type previewJob struct {
	seq int
	doc Document
	crd *apiextensionsv1.CustomResourceDefinition
}

type previewDone struct {
	text     []byte
	accepted bool
	err      error
	// before is printed as is before err (the violations of a non-structural schema).
	before []byte
}

func newPreviewPool(ctx context.Context, o *PreviewOptions, ns string, olds map[oldKey][]byte, out *previewOutput) *previewPool {
	p := &previewPool{
		ctx: ctx, o: o, ns: ns, olds: olds, out: out,
		jobs:    make(chan previewJob),
		window:  make(chan struct{}, 4*o.Workers),
		done:    make(chan struct{}),
		results: map[int]previewDone{},
	}
	for i := 0; i < o.Workers; i++ {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

func (p *previewPool) total() int { return p.accepted + p.rejected }

// submit queues one object; it blocks while the window of objects in flight is full.
func (p *previewPool) submit(d Document, crd *apiextensionsv1.CustomResourceDefinition) error {
	if err := p.failed(); err != nil {
		return err
	}
	select {
	case p.window <- struct{}{}:
	case <-p.ctx.Done():
		return Interrupted(p.ctx)
	}
	job := previewJob{seq: p.seq, doc: d, crd: crd}
	p.seq++
	select {
	case p.jobs <- job:
		return nil
	case <-p.ctx.Done():
		return Interrupted(p.ctx)
	}
}

func (p *previewPool) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// finish waits for the objects in flight and returns the first error, in input order.
func (p *previewPool) finish() error {
	close(p.jobs)
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *previewPool) work() {
	defer p.wg.Done()
	previewers := map[string]*preview.Previewer{} // a Previewer is not safe for concurrent use
	for job := range p.jobs {
		var r previewDone
		if p.ctx.Err() != nil {
			r.err = Interrupted(p.ctx)
		} else {
			r = p.preview(job, previewers)
		}
		p.deliver(job.seq, r)
	}
}

// deliver records a result and writes every result that is next in order.
func (p *previewPool) deliver(seq int, r previewDone) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.results[seq] = r
	for {
		r, ok := p.results[p.next]
		if !ok {
			return
		}
		delete(p.results, p.next)
		p.next++
		<-p.window
		if p.err != nil {
			continue
		}
		if r.err != nil {
			if len(r.before) > 0 {
				_, _ = p.out.w.Write(r.before)
			}
			p.err = r.err
			continue
		}
		if r.accepted {
			p.accepted++
		} else {
			p.rejected++
		}
		if err := p.out.write(r.text); err != nil {
			p.err = err
		}
	}
}

func (p *previewPool) preview(job previewJob, previewers map[string]*preview.Previewer) previewDone {
	d, crd := job.doc, job.crd
	pv, ok := previewers[crd.Name]
	if !ok {
		var err error
		pv, err = preview.NewPreviewer(crd)
		if err != nil {
			return previewDone{err: Usage(fmt.Errorf("%s: %w", d.Where(), err))}
		}
		previewers[crd.Name] = pv
	}
	opts := preview.PreviewOptions{FieldValidation: p.o.fv, ReadVersion: p.o.Version, Namespace: p.ns}
	var res *preview.PreviewResult
	var err error
	if p.olds != nil {
		old, ferr := p.o.findOld(p.olds, d, p.ns)
		if ferr != nil {
			return previewDone{err: ferr}
		}
		res, err = pv.Update(p.ctx, d.JSON, old, opts)
	} else {
		res, err = pv.Create(p.ctx, d.JSON, opts)
	}
	if err != nil {
		var nse *preview.NonStructuralError
		var before bytes.Buffer
		if errors.As(err, &nse) && p.olds == nil {
			// The violations go out before the error, as explain prints them.
			if perr := printViolations(&before, nse.Violations, p.o.out.noHeaders); perr != nil {
				return previewDone{err: perr}
			}
		}
		return previewDone{err: previewInputError(d, crd, err), before: before.Bytes()}
	}
	item := PreviewItem{Source: d.Where(), PreviewResult: *res}
	text, err := p.out.format(item, d.JSON)
	return previewDone{text: text, accepted: res.Accepted(), err: err}
}

// previewOutput writes the results in the chosen format, as they come.
type previewOutput struct {
	o       *PreviewOptions
	w       io.Writer
	started bool
	items   int
}

func newPreviewOutput(o *PreviewOptions) *previewOutput { return &previewOutput{o: o, w: o.g.Out} }

// format renders one item (in a worker); nothing when --only-rejected and it was accepted.
func (out *previewOutput) format(item PreviewItem, input []byte) ([]byte, error) {
	if out.o.OnlyRejected && item.Accepted() {
		return nil, nil
	}
	var b bytes.Buffer
	switch out.o.out.format {
	case outputJSON:
		js, err := json.MarshalIndent(item, "    ", "  ")
		if err != nil {
			return nil, err
		}
		b.WriteString("    ")
		b.Write(js)
	case outputYAML:
		y, err := yaml.Marshal(item)
		if err != nil {
			return nil, err
		}
		for i, line := range strings.SplitAfter(strings.TrimSuffix(string(y), "\n"), "\n") {
			if i == 0 {
				b.WriteString("- ")
			} else if line != "\n" {
				b.WriteString("  ")
			}
			b.WriteString(line)
		}
		b.WriteString("\n")
	case outputName:
		b.WriteString(nameLine(item))
	default:
		if err := printPreview(&b, item, input, out.o.Diff); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// nameLine is `-o name`'s line: verdict, object (kubectl's kind.group/name), counts, source.
func nameLine(item PreviewItem) string {
	r := item.PreviewResult
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	name := r.Name
	if name == "" {
		name = "(no name)"
	}
	obj := strings.ToLower(r.Kind) + "." + gv.Group + "/" + name
	if r.Namespace != "" {
		obj += " -n " + r.Namespace
	}
	return fmt.Sprintf("%s %s errors=%d warnings=%d pruned=%d defaulted=%d source=%q\n",
		r.Verdict, obj, len(r.Errors), len(r.Warnings), len(r.Pruned)+len(r.PrunedOnConversion), len(r.Defaulted), item.Source)
}

func (out *previewOutput) write(text []byte) error {
	if len(text) == 0 {
		return nil
	}
	switch out.o.out.format {
	case outputJSON:
		if !out.started {
			if _, err := io.WriteString(out.w, "{\n  \"items\": [\n"); err != nil {
				return err
			}
		} else if _, err := io.WriteString(out.w, ",\n"); err != nil {
			return err
		}
	case outputYAML:
		if !out.started {
			if _, err := io.WriteString(out.w, "items:\n"); err != nil {
				return err
			}
		}
	}
	out.started = true
	out.items++
	_, err := out.w.Write(text)
	return err
}

// finish writes the counts.
func (out *previewOutput) finish(accepted, rejected, skipped int) error {
	var err error
	switch out.o.out.format {
	case outputJSON:
		head := "\n  ],\n"
		if !out.started {
			head = "{\n  \"items\": [],\n"
		}
		_, err = fmt.Fprintf(out.w, "%s  \"accepted\": %d,\n  \"rejected\": %d,\n  \"skipped\": %d\n}\n", head, accepted, rejected, skipped)
	case outputYAML:
		head := ""
		if !out.started {
			head = "items: []\n"
		}
		_, err = fmt.Fprintf(out.w, "%saccepted: %d\nrejected: %d\nskipped: %d\n", head, accepted, rejected, skipped)
	case outputName:
		// One line per object on stdout; the counts go to stderr.
		_, err = fmt.Fprintf(out.o.g.ErrOut, "%s: %d accepted, %d rejected\n", plural(accepted+rejected, "object"), accepted, rejected)
	default:
		_, err = fmt.Fprintf(out.w, "%s: %d accepted, %d rejected\n", plural(accepted+rejected, "object"), accepted, rejected)
	}
	return err
}
