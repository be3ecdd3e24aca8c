package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/preview"
	"github.com/crdver/kubectl-crdver/printers"
)

// previewPool previews objects on the workers of a preview.Pool and writes the results in the
// input's order as they come, counting the verdicts.
type previewPool struct {
	ctx  context.Context
	o    *PreviewOptions
	ns   string
	olds map[oldKey][]byte
	out  *previewOutput
	pool *preview.Pool[previewJob, previewDone]

	accepted int
	rejected int
}

type previewJob struct {
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
	p := &previewPool{ctx: ctx, o: o, ns: ns, olds: olds, out: out}
	p.pool = preview.NewPool(ctx, o.Workers, p.preview, p.deliver)
	return p
}

func (p *previewPool) total() int { return p.accepted + p.rejected }

// submit queues one object; it blocks while the window of objects in flight is full.
func (p *previewPool) submit(d Document, crd *apiextensionsv1.CustomResourceDefinition) error {
	return p.poolError(p.pool.Submit(previewJob{doc: d, crd: crd}))
}

// finish waits for the objects in flight and returns the first error, in input order.
func (p *previewPool) finish() error {
	return p.poolError(p.pool.Wait())
}

// poolError is the pool's error with its exit code: the context's cause is an interruption.
func (p *previewPool) poolError(err error) error {
	if err != nil && p.ctx.Err() != nil && errors.Is(err, context.Cause(p.ctx)) {
		return Interrupted(p.ctx)
	}
	return err
}

// deliver writes one result, in input order (called by the pool one at a time).
func (p *previewPool) deliver(r previewDone) error {
	if r.err != nil {
		if len(r.before) > 0 {
			_, _ = p.out.w.Write(r.before)
		}
		return r.err
	}
	if r.accepted {
		p.accepted++
	} else {
		p.rejected++
	}
	return p.out.write(r.text)
}

// preview previews one object on a worker of the pool.
func (p *previewPool) preview(ctx context.Context, w *preview.Worker, job previewJob) previewDone {
	d, crd := job.doc, job.crd
	pv, err := w.Previewer(crd, preview.WithKubeVersion(p.o.judged.Version))
	if err != nil {
		return previewDone{err: Usage(fmt.Errorf("%s: %w", d.Where(), err))}
	}
	opts := preview.PreviewOptions{FieldValidation: p.o.fv, ReadVersion: p.o.Version, Namespace: p.ns}
	var res *preview.PreviewResult
	if p.olds != nil {
		old, ferr := p.o.findOld(p.olds, d, p.ns)
		if ferr != nil {
			return previewDone{err: ferr}
		}
		res, err = pv.Update(ctx, d.JSON, old, opts)
	} else {
		res, err = pv.Create(ctx, d.JSON, opts)
	}
	if err != nil {
		var nse *preview.NonStructuralError
		var before bytes.Buffer
		if errors.As(err, &nse) && p.olds == nil {
			// The violations go out before the error, as explain prints them.
			if perr := printers.PrintViolations(&before, nse.Violations, p.o.out.noHeaders); perr != nil {
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
		if err := printers.Preview(&b, item.Source, item.PreviewResult, input, out.o.Diff, out.o.colorOn); err != nil {
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
		_, err = fmt.Fprintf(out.w, "%s  \"accepted\": %d,\n  \"rejected\": %d,\n  \"skipped\": %d,\n  \"kubernetesVersion\": %q\n}\n", head, accepted, rejected, skipped, out.o.judged.String())
	case outputYAML:
		head := ""
		if !out.started {
			head = "items: []\n"
		}
		_, err = fmt.Fprintf(out.w, "%saccepted: %d\nrejected: %d\nskipped: %d\nkubernetesVersion: %q\n", head, accepted, rejected, skipped, out.o.judged.String())
	case outputName:
		// One line per object on stdout; the counts go to stderr.
		_, err = fmt.Fprintf(out.o.g.ErrOut, "%s: %d accepted, %d rejected\n", plural(accepted+rejected, "object"), accepted, rejected)
	default:
		_, err = fmt.Fprintf(out.w, "%s: %d accepted, %d rejected\n", plural(accepted+rejected, "object"), accepted, rejected)
	}
	return err
}
