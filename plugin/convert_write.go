package plugin

import (
	"context"
	"fmt"
	"io"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/manifest"
	"github.com/crdver/kubectl-crdver/printers"
)

func stdinIn(files []string) bool {
	for _, f := range files {
		if f == "-" {
			return true
		}
	}
	return false
}

// writeCRDs are the CRDs of `convert --write` and `--check`: the one named, else every CRD of
// --crd-file (a release) or of the cluster.
func (o *ConvertOptions) writeCRDs(ctx context.Context) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if o.Name != "" {
		crd, err := o.source.one(ctx, o.Name)
		if err != nil {
			return nil, err
		}
		return []*apiextensionsv1.CustomResourceDefinition{crd}, nil
	}
	crds, err := o.source.all(ctx)
	if err == nil && len(crds) == 0 {
		return nil, UsageErrorf("no CustomResourceDefinition found: name one, or give a release's CRDs with --crd-file")
	}
	return crds, err
}

// write rewrites the files (convert.Write, judged as the version judged, returned) or, with
// --check, only checks them (convert.Check; no version), giving file each file's result as it
// is done. When interrupted, the report of the files done comes with the error.
func (o *ConvertOptions) write(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition, file func(*convert.WriteReport, convert.FileResult) error) (*convert.WriteReport, *judgedAs, error) {
	opts := convert.WriteOptions{
		Options:       convert.Options{ReviewVersion: o.ReviewVersion, BatchSize: o.BatchSize, To: o.To},
		CRDs:          crds,
		Files:         o.Files,
		File:          file,
		DryRun:        o.DryRun,
		AllowDataLoss: o.AllowDataLoss,
		Strict:        o.Strict,
		TransportFor:  o.transport,
	}
	var rep *convert.WriteReport
	var judged *judgedAs
	var err error
	if o.Check {
		rep, err = convert.Check(ctx, opts)
	} else {
		j, jerr := o.kube.resolve(ctx, o.g, !o.source.offline(), false)
		if jerr != nil {
			return nil, nil, jerr
		}
		opts.KubeVersion = j.Version
		rep, err = convert.Write(ctx, opts)
		if rep != nil {
			judged = &j
		}
	}
	switch {
	case ctx.Err() != nil && rep != nil:
		return rep, judged, interruptedWrite(ctx, rep)
	case ctx.Err() != nil:
		return nil, judged, Interrupted(ctx)
	case err != nil:
		return nil, nil, Usage(err)
	}
	return rep, judged, nil
}

// interruptedWrite says what an interrupted --write or --check did: the files above, each
// rewritten whole or left as it was, and the one at hand left as it was (or done, when only
// its listing was cut short).
func interruptedWrite(ctx context.Context, rep *convert.WriteReport) error {
	what := "nothing was written"
	if n := rep.Written(); n > 0 {
		what = fmt.Sprintf("%s rewritten (listed above), each whole; every other file is as it was", plural(n, "file"))
	}
	at := rep.Interrupted + " was left as it was"
	switch {
	case rep.InterruptedListing != "":
		at = "while the result of " + rep.InterruptedListing + " was printed (that file was done)"
	case rep.Interrupted == "":
		at = "after the last file was done"
	}
	return fmt.Errorf("%w: %s; %s", &manifest.InterruptedError{Cause: context.Cause(ctx)}, at, what) // the exit code: rep.Ended's
}

// runWrite is `convert -f PATH --write` (and --dry-run) and `convert -f PATH --check`, for
// one CRD or every CRD of a release: each file's result printed as it is done, the counts at
// the end.
func (o *ConvertOptions) runWrite(ctx context.Context) error {
	crds, err := o.writeCRDs(ctx)
	if err != nil {
		return err
	}
	// Each file's result is printed as it is done; Ctrl-C stops a long listing at its next
	// write (the file itself is done). The counts at the end are printed whatever.
	listing := &untilDone{ctx: ctx, w: o.g.Out}
	out := printers.NewConvertWriteStream(listing, o.printer)
	rep, judged, err := o.write(ctx, crds, out.File)
	listing.ctx = context.Background()
	if judged != nil {
		defer judged.printNote(o.g.ErrOut)
	}
	if rep == nil {
		return err
	}
	if perr := out.Finish(rep); perr != nil {
		return perr
	}
	return end(rep.Ended(ctx), err) // err: interrupted, the report above is what was done
}

// untilDone writes to w until ctx ends, then fails every write with ctx's error.
type untilDone struct {
	ctx context.Context
	w   io.Writer
}

func (u *untilDone) Write(p []byte) (int, error) {
	if err := u.ctx.Err(); err != nil {
		return 0, err
	}
	return u.w.Write(p)
}
