package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/crdver/kubectl-crdver/preview"
	"github.com/crdver/kubectl-crdver/printers"
)

// previewRun is a run's previews: preview.Stream previews the objects on --workers workers
// and printers.PreviewPrinter writes the results in the input's order in the -o format.
type previewRun struct {
	*preview.Stream[printers.PreviewText]
	*printers.PreviewPrinter
}

// newPreviewStream starts the previews of a run, their errors worded for this command.
func (o *PreviewOptions) newPreviewStream(ctx context.Context, ns string, olds map[oldKey][]byte) previewRun {
	po := printers.PreviewPrinterOptions{
		Out: o.g.Out, ErrOut: o.g.ErrOut, Format: o.out.format, NoHeaders: o.out.noHeaders,
		OnlyRejected: o.OnlyRejected, Diff: o.Diff, Color: o.colorOn, Update: olds != nil,
		PreviewerError: func(job preview.Job, err error) error {
			return Usage(fmt.Errorf("%s: %w", job.Source, err))
		},
		InputError: func(job preview.Job, err error) error { return previewInputError(job.Source, job.CRD, err) },
	}
	so := preview.StreamOptions{
		Workers: o.Workers, KubeVersion: o.judged.Version,
		Preview: preview.PreviewOptions{FieldValidation: o.fv, ReadVersion: o.Version, Namespace: ns},
	}
	if olds != nil {
		so.Old = func(job preview.Job) ([]byte, error) { return o.findOld(olds, job.Source, job.JSON, ns) }
	}
	p := printers.NewPreviewPrinter(po)
	return previewRun{Stream: preview.NewStream(ctx, so, p.Render, p.Write), PreviewPrinter: p}
}

// poolError is the stream's error with its exit code: the context's cause is an interruption.
func poolError(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
		return Interrupted(ctx)
	}
	return err
}
