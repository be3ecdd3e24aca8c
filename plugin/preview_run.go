package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/preview"
	"github.com/crdver/kubectl-crdver/printers"
)

// Run previews every object of the input, streaming: documents are read one at a time,
// previewed by --workers workers, and printed in the input's order as soon as they are done.
func (o *PreviewOptions) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Without --crd-file the CRDs may come from the cluster: judge as its version when it
	// can be read.
	judged, err := o.kube.resolve(ctx, o.g, !o.source.offline(), false)
	if err != nil {
		return err
	}
	o.judged = judged
	olds, err := o.readOld(ctx)
	if err != nil {
		return err
	}
	ns := o.namespace()
	res, err := o.newResolver(ctx)
	if err != nil {
		return err
	}
	progress := &InputProgress{}
	var objects atomic.Int64
	stopProgress := printers.InputProgress(o.progress.toProgress(o.g.ErrOut), o.Files, o.input.Recursive, progress, &objects)
	defer stopProgress()
	pool := o.newPreviewStream(ctx, ns, olds)
	skipped := o.skipped()
	crdsInInput, readErr := o.submit(ctx, res, pool, skipped, progress, &objects)
	poolErr := poolError(ctx, pool.Wait())
	stopProgress()
	switch {
	case ctx.Err() != nil:
		return Unavailable(fmt.Errorf("interrupted after %s: the output is incomplete", plural(pool.Total(), "object")))
	case poolErr != nil:
		return poolErr
	case readErr != nil:
		return readErr
	}
	return o.finish(pool, skipped, crdsInInput)
}

// namespace is the namespace of objects that name none: the context's, else default.
func (o *PreviewOptions) namespace() string {
	if ns, err := o.g.Namespace(); err == nil && ns != "" {
		return ns
	}
	return "default"
}

// skipped counts the documents no CRD defines, in the words of where the CRDs come from.
func (o *PreviewOptions) skipped() *printers.Skipped {
	switch {
	case o.CRDName != "":
		return &printers.Skipped{What: "not of CustomResourceDefinition " + o.CRDName, One: "does not belong to CustomResourceDefinition " + o.CRDName}
	case o.source.offline():
		return &printers.Skipped{What: "no CustomResourceDefinition of --crd-file or the input defines their kind", One: "is not defined by any CustomResourceDefinition of --crd-file or the input"}
	}
	return &printers.Skipped{What: "no CustomResourceDefinition in the input or the cluster defines their kind", One: "is not defined by any CustomResourceDefinition in the input or the cluster"}
}

// submit reads the input a document at a time: CRDs join the resolver, objects go to the
// pool with the CRD that defines them, the rest are skipped (or refused with --strict-kinds).
// It returns the number of CRDs in the input.
func (o *PreviewOptions) submit(ctx context.Context, res *previewResolver, pool previewRun, skipped *printers.Skipped, progress *InputProgress, objects *atomic.Int64) (int, error) {
	crdsInInput := 0
	err := EachDocument(ctx, o.Files, InputOptions{Stdin: o.g.In, Recursive: o.input.Recursive, Progress: progress}, func(d Document) error {
		if crdinfo.IsCRD(d.APIVersion, d.Kind) {
			crdsInInput++
			if res.Prescanned(d.Where()) {
				return nil
			}
			crd, err := decodeCRD(ctx, d, o.judged.Version, o.verboseOut())
			if err != nil {
				return err
			}
			return inputError(res.AddInput(d, crd))
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
			skipped.Add(d)
			return nil
		}
		objects.Add(1)
		return poolError(ctx, pool.Submit(preview.Job{Source: d.Where(), JSON: d.JSON, CRD: crd}))
	})
	return crdsInInput, err
}

// finish prints the counts, the documents skipped and the version judged as, and returns the
// exit status: 1 when an object would be rejected, 2 when there was nothing to preview.
func (o *PreviewOptions) finish(pool previewRun, skipped *printers.Skipped, crdsInInput int) error {
	if pool.Total() == 0 {
		if skipped.N == 0 && crdsInInput > 0 {
			return UsageErrorf("%s: only CustomResourceDefinitions, no objects to preview", strings.Join(o.Files, ", "))
		}
		if skipped.N == 0 {
			return UsageErrorf("%s: no objects found", strings.Join(o.Files, ", "))
		}
		return UsageErrorf("nothing to preview: %s skipped; the first: %s (give the CRD with --crd-file, or put it in the input before the objects)",
			plural(skipped.N, "document"), skipped.FirstWhy)
	}
	if err := pool.Finish(skipped.N, o.judged.String()); err != nil {
		return err
	}
	if err := skipped.Report(o.g.ErrOut, o.input.Verbose, "-v"); err != nil {
		return err
	}
	o.judged.printNote(o.g.ErrOut)
	if pool.Rejected() > 0 {
		return ProblemsFound("%d of %s would be rejected by the API server", pool.Rejected(), plural(pool.Total(), "object"))
	}
	return nil
}

func (o *PreviewOptions) verboseOut() io.Writer {
	if o.input.Verbose {
		return o.g.ErrOut
	}
	return nil
}
