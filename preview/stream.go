package preview

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/kubeversion"
)

// Job is one object to preview with its CRD.
type Job struct {
	// Source names the file and document the object came from.
	Source string
	JSON   []byte
	CRD    *apiextensionsv1.CustomResourceDefinition
}

// Step names the step of a job that failed (Outcome.Step).
type Step int

const (
	// StepPreview: the preview itself refused the object (*InputError, *NonStructuralError, …).
	StepPreview Step = iota
	// StepPreviewer: the CRD's Previewer could not be built (no storage version, …).
	StepPreviewer
	// StepOld: StreamOptions.Old did not find the stored object; its error as it returned it.
	StepOld
)

// Outcome is one job's preview: its Result, or the Err of the Step that failed.
type Outcome struct {
	Job    Job
	Result *PreviewResult
	Err    error
	Step   Step
}

// StreamOptions say how a Stream previews the objects.
type StreamOptions struct {
	// Workers previewing at once (at least one).
	Workers int
	// KubeVersion is the version the objects are judged as (WithKubeVersion: the process
	// must run as it).
	KubeVersion kubeversion.Version
	// Preview are the options of each preview (field validation, version read, namespace).
	Preview PreviewOptions
	// Old, when set, finds the stored object of each job: every job is then an update.
	Old func(job Job) ([]byte, error)
}

// Stream previews many objects on the workers of a Pool: each job's Outcome is handed to render
// on the worker that previewed it (so that turning it into output runs in parallel too), and
// what render returns to deliver, one at a time, in the order the jobs were submitted.
type Stream[R any] struct {
	o      StreamOptions
	render func(Outcome) R
	pool   *Pool[Job, R]
}

// NewStream starts the workers; they stop when ctx is done. deliver's first error stops the
// delivery (see NewPool).
func NewStream[R any](ctx context.Context, o StreamOptions, render func(Outcome) R, deliver func(R) error) *Stream[R] {
	s := &Stream[R]{o: o, render: render}
	s.pool = NewPool(ctx, o.Workers, s.work, deliver)
	return s
}

// Submit queues one object; it blocks while the window of objects in flight is full.
func (s *Stream[R]) Submit(job Job) error { return s.pool.Submit(job) }

// Wait waits for the objects in flight and returns the first error, in submission order.
func (s *Stream[R]) Wait() error { return s.pool.Wait() }

// work previews one object on a worker of the pool.
func (s *Stream[R]) work(ctx context.Context, w *Worker, job Job) R {
	return s.render(s.preview(ctx, w, job))
}

func (s *Stream[R]) preview(ctx context.Context, w *Worker, job Job) Outcome {
	pv, err := w.Previewer(job.CRD, WithKubeVersion(s.o.KubeVersion))
	if err != nil {
		return Outcome{Job: job, Err: err, Step: StepPreviewer}
	}
	var res *PreviewResult
	if s.o.Old != nil {
		old, ferr := s.o.Old(job)
		if ferr != nil {
			return Outcome{Job: job, Err: ferr, Step: StepOld}
		}
		res, err = pv.Update(ctx, job.JSON, old, s.o.Preview)
	} else {
		res, err = pv.Create(ctx, job.JSON, s.o.Preview)
	}
	if err != nil {
		return Outcome{Job: job, Err: err, Step: StepPreview}
	}
	return Outcome{Job: job, Result: res}
}
