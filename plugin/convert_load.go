package plugin

// convert_load.go: `convert --load`: does the webhook meet the API server's budget?

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/printers"
)

// validateLoad checks the flags of --load (and that its own flags are not given without it).
func (o *ConvertOptions) validateLoad() error {
	if !o.Load {
		if o.LoadRequests != convert.DefaultLoadRequests || o.LoadDuration != convert.DefaultLoadDuration || !slices.Equal(o.LoadSizes, kep95Sizes()) {
			return UsageErrorf("--load-sizes, --load-requests and --load-duration go with --load")
		}
		return nil
	}
	switch {
	case o.Write || o.Check:
		return UsageErrorf("--load times the webhook; --write and --check work on files: choose one")
	case o.RoundTrip || o.ViaAPIServer || o.Keep != "" || o.Strict:
		return UsageErrorf("--round-trip, --via-apiserver, --keep and --strict do not apply to --load (it checks every answer's envelope and the first answer of each size in full)")
	case o.LoadRequests < 1:
		return UsageErrorf("--load-requests %d: want at least 1", o.LoadRequests)
	case o.LoadDuration <= 0:
		return UsageErrorf("--load-duration %s: want a positive duration, e.g. 60s", o.LoadDuration)
	case len(o.LoadSizes) == 0:
		return UsageErrorf("--load-sizes: give at least one of 1, 1500, 10000")
	}
	for _, n := range o.LoadSizes {
		if _, ok := convert.LoadSizeFor(n); !ok {
			return UsageErrorf("--load-sizes %d: the CRD GA scale budget has sizes 1, 1500 and 10000 only", n)
		}
	}
	return nil
}

func kep95Sizes() []int {
	var out []int
	for _, s := range convert.KEP95Sizes {
		out = append(out, s.Objects)
	}
	return out
}

// runLoad is `convert --load`.
func (o *ConvertOptions) runLoad(ctx context.Context) error {
	crd, err := o.loadCRD(ctx)
	if err != nil {
		return err
	}
	objects, notes, err := o.loadObjects(ctx, crd)
	if err != nil {
		return err
	}
	tr, err := o.transport(crd)
	if err != nil {
		return err
	}
	rep, err := o.load(ctx, crd, tr, objects)
	if err != nil {
		return err
	}
	rep.Notes = append(notes, rep.Notes...)
	if err := o.printer.PrintReport(o.g.Out, printers.ConvertLoad(rep)); err != nil {
		return err
	}
	return end(rep.Ended(), webhookUnreachable(crd.Name, rep.Unreachable, rep.UnreachableError))
}

// loadCRD is the CRD whose conversion webhook --load times.
func (o *ConvertOptions) loadCRD(ctx context.Context) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := o.crdAndVersions(ctx)
	if err != nil {
		return nil, err
	}
	if convert.Strategy(crd) != string(apiextensionsv1.WebhookConverter) {
		return nil, UsageErrorf("%s: spec.conversion.strategy is %s: there is no webhook to load", crd.Name, convert.Strategy(crd))
	}
	return crd, nil
}

// loadObjects are the objects that fill --load's requests: the input's, the generated or the
// live ones, read once, no more than the largest request holds.
func (o *ConvertOptions) loadObjects(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) ([]convert.Object, []string, error) {
	most := 0
	for _, n := range o.LoadSizes {
		most = max(most, n)
	}
	if o.FromCluster && o.Limit == 0 {
		o.Limit = int64(most)
	}
	src, err := o.objects(ctx, crd)
	if err != nil {
		return nil, nil, err
	}
	defer src.close()
	objects, err := convert.ReadAll(ctx, src, most)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, Interrupted(ctx)
		}
		var listErr *convert.ListError
		if errors.As(err, &listErr) {
			return nil, nil, clusterError(fmt.Sprintf("listing %s at %s", crd.Name, o.From), listErr.Err)
		}
		if ierr := inputError(err); ierr != err {
			return nil, nil, ierr
		}
		return nil, nil, Usage(err)
	}
	if len(objects) == 0 {
		if err := src.none(); err != nil {
			return nil, nil, err
		}
		return nil, nil, UsageErrorf("%s: no objects to fill the requests with: create some, or use --generate N", crd.Name)
	}
	notes := src.notes(&convert.Report{Objects: len(objects)})
	switch {
	case o.FromCluster:
		notes = []string{fmt.Sprintf("%d object(s) read from the cluster at %s", len(objects), o.From)}
	case len(objects) == most && len(o.Files) > 0:
		notes = append(notes, fmt.Sprintf("the first %d object(s) of the input were read: no request holds more", most))
	}
	return objects, notes, nil
}

// load times the webhook (convert.Load) at each --load-sizes, with a progress display.
func (o *ConvertOptions) load(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, tr convert.Transport, objects []convert.Object) (*convert.LoadReport, error) {
	var sizes []convert.LoadSize
	for _, n := range o.LoadSizes {
		s, _ := convert.LoadSizeFor(n)
		sizes = append(sizes, s)
	}
	var done atomic.Int64
	var current atomic.Int64
	stop := o.progress.Start(Task{Name: "timing", Prefix: "convert --load", Unit: "requests", Verb: "timed",
		Total: int64(len(sizes) * o.LoadRequests), Done: done.Load,
		Detail: func() string { return fmt.Sprintf("%d objects per request", sizes[current.Load()].Objects) }})
	rep, err := convert.Load(ctx, convert.LoadOptions{CRD: crd, To: o.To, ReviewVersion: o.ReviewVersion, Transport: tr, Sizes: sizes,
		Requests: o.LoadRequests, MaxDuration: o.LoadDuration,
		Progress: func(size, d, total int) {
			current.Store(int64(size))
			done.Store(int64(size*total + d))
		}}, objects)
	stop()
	if ctx.Err() != nil {
		return nil, Interrupted(ctx)
	}
	if err != nil {
		return nil, Usage(err)
	}
	return rep, nil
}

// webhookUnreachable words how a run could not reach crd's conversion webhook: the
// transport's error with the advice for its hint (nil: it was reached).
func webhookUnreachable(crd, unreachable string, te *convert.TransportError) error {
	if unreachable == "" {
		return nil
	}
	msg := unreachable
	if te != nil {
		msg = te.Err.Error()
		if a := webhookAdvice(te.Hint); a != "" {
			msg += " (" + a + ")"
		}
	}
	return fmt.Errorf("%s: cannot reach the conversion webhook: %s", crd, msg)
}
