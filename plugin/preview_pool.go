package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/crdver/kubectl-crdver/preview"
	"github.com/crdver/kubectl-crdver/printers"
)

// newPreviewStream previews the objects on --workers workers (printers.PreviewStream) and writes
// the results in the input's order in the -o format, its errors worded for this command.
func (o *PreviewOptions) newPreviewStream(ctx context.Context, ns string, olds map[oldKey][]byte) *printers.PreviewStream {
	so := printers.PreviewStreamOptions{
		Out: o.g.Out, ErrOut: o.g.ErrOut, Format: o.out.format, NoHeaders: o.out.noHeaders,
		OnlyRejected: o.OnlyRejected, Diff: o.Diff, Color: o.colorOn, Workers: o.Workers,
		KubeVersion: o.judged.Version,
		Preview:     preview.PreviewOptions{FieldValidation: o.fv, ReadVersion: o.Version, Namespace: ns},
		PreviewerError: func(job printers.PreviewJob, err error) error {
			return Usage(fmt.Errorf("%s: %w", job.Source, err))
		},
		InputError: func(job printers.PreviewJob, err error) error { return previewInputError(job.Source, job.CRD, err) },
	}
	if olds != nil {
		so.Old = func(job printers.PreviewJob) ([]byte, error) { return o.findOld(olds, job.Source, job.JSON, ns) }
	}
	return printers.NewPreviewStream(ctx, so)
}

// poolError is the stream's error with its exit code: the context's cause is an interruption.
func poolError(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
		return Interrupted(ctx)
	}
	return err
}
