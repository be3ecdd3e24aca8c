package plugin

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/convert"
)

func stdinIn(files []string) bool {
	for _, f := range files {
		if f == "-" {
			return true
		}
	}
	return false
}

// runWrite is `convert -f PATH --write` (and --dry-run) and `convert -f PATH --check`.
func (o *ConvertOptions) runWrite(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	opts := convert.WriteOptions{
		Options:       convert.Options{CRD: crd, To: o.To, ReviewVersion: o.ReviewVersion, BatchSize: o.BatchSize},
		Files:         o.Files,
		DryRun:        o.DryRun,
		AllowDataLoss: o.AllowDataLoss,
	}
	var (
		rep *convert.WriteReport
		err error
	)
	if o.Check {
		rep, err = convert.Check(ctx, opts)
	} else {
		if convert.Strategy(crd) == string(apiextensionsv1.WebhookConverter) {
			if opts.Transport, err = o.transport(crd); err != nil {
				return err
			}
		}
		rep, err = convert.Write(ctx, opts)
	}
	if ctx.Err() != nil {
		return Interrupted(ctx)
	}
	if err != nil {
		return Usage(err)
	}
	if err := o.printer.PrintReport(o.g.Out, rep); err != nil {
		return err
	}
	if c := rep.Conversion; c != nil && c.Unreachable != "" {
		return Unavailable(fmt.Errorf("%s: cannot reach the conversion webhook: %s: no file was written", crd.Name, c.Unreachable))
	}
	if n := rep.Problems(); n > 0 {
		if o.Check {
			return ProblemsFound("%s: %d file(s) with objects still at a version other than %s: convert them with --write", crd.Name, n, o.To)
		}
		return ProblemsFound("%s: %d file(s) not converted (listed above); nothing in them was changed", crd.Name, n)
	}
	return nil
}
