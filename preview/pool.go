package preview

import (
	"context"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Pool runs jobs (typically: preview one object) on several workers and hands the results to
// deliver in the order the jobs were submitted. At most a few jobs per worker are in flight, so
// memory stays bounded whatever the number of jobs; Submit blocks while the window is full.
// Jobs submitted with the same key (SubmitKeyed: e.g. the same object) run one after another,
// in submission order.
type Pool[J, R any] struct {
	ctx     context.Context
	work    func(ctx context.Context, w *Worker, job J) R
	deliver func(R) error
	jobs    chan poolJob[J]
	window  chan struct{}
	wg      sync.WaitGroup

	mu      sync.Mutex
	keys    map[string]chan struct{} // per key, the done channel of its last job submitted
	results map[int]poolResult[R]
	next    int
	seq     int
	err     error
}

type poolJob[J any] struct {
	seq int
	job J
	// Keyed jobs: after is closed when the job of the same key submitted before this one is
	// done (nil: none in flight), done when this one is.
	key         string
	after, done chan struct{}
}

type poolResult[R any] struct {
	r   R
	err error
}

// Worker is what one worker of a Pool keeps between jobs: a Previewer per CRD (a Previewer is
// not safe for concurrent use, and is worth building once for many objects).
type Worker struct {
	previewers map[string]*Previewer
}

// Previewer returns the worker's Previewer for crd, building it on first use (by CRD name) with
// opts (e.g. WithKubeVersion).
func (w *Worker) Previewer(crd *apiextensionsv1.CustomResourceDefinition, opts ...Option) (*Previewer, error) {
	if pv, ok := w.previewers[crd.Name]; ok {
		return pv, nil
	}
	pv, err := NewPreviewer(crd, opts...)
	if err != nil {
		return nil, err
	}
	w.previewers[crd.Name] = pv
	return pv, nil
}

// NewPool starts workers (at least one) that call work for each submitted job. deliver gets the
// results in submission order, one at a time; its first error stops the delivery of the later
// results and is what Submit and Wait return from then on. Once ctx is done, jobs not yet started
// are not run, and the error is context.Cause(ctx).
func NewPool[J, R any](ctx context.Context, workers int, work func(ctx context.Context, w *Worker, job J) R, deliver func(R) error) *Pool[J, R] {
	if workers < 1 {
		workers = 1
	}
	p := &Pool[J, R]{
		ctx: ctx, work: work, deliver: deliver,
		jobs:    make(chan poolJob[J]),
		window:  make(chan struct{}, 4*workers),
		results: map[int]poolResult[R]{},
		keys:    map[string]chan struct{}{},
	}
	for i := 0; i < workers; i++ {
		p.wg.Add(1)
		go p.run()
	}
	return p
}

// Submit queues one job; it blocks while the window of jobs in flight is full. It returns the
// first error so far (of deliver, or the context's).
func (p *Pool[J, R]) Submit(job J) error { return p.submit(poolJob[J]{job: job}) }

// SubmitKeyed is Submit for a job that must not start before the jobs submitted earlier with
// the same key are done (their results are delivered in submission order all the same).
func (p *Pool[J, R]) SubmitKeyed(key string, job J) error {
	return p.submit(poolJob[J]{job: job, key: key, done: make(chan struct{})})
}

func (p *Pool[J, R]) submit(j poolJob[J]) error {
	if err := p.failed(); err != nil {
		return err
	}
	select {
	case p.window <- struct{}{}:
	case <-p.ctx.Done():
		return context.Cause(p.ctx)
	}
	j.seq = p.seq
	p.seq++
	if j.done != nil {
		p.mu.Lock()
		j.after = p.keys[j.key]
		p.keys[j.key] = j.done
		p.mu.Unlock()
	}
	select {
	case p.jobs <- j:
		return nil
	case <-p.ctx.Done():
		return context.Cause(p.ctx)
	}
}

func (p *Pool[J, R]) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Wait waits for the jobs in flight, delivers their results and returns the first error, in
// submission order. No job may be submitted after Wait.
func (p *Pool[J, R]) Wait() error {
	close(p.jobs)
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *Pool[J, R]) run() {
	defer p.wg.Done()
	w := &Worker{previewers: map[string]*Previewer{}}
	for job := range p.jobs {
		if job.after != nil {
			select {
			case <-job.after:
			case <-p.ctx.Done():
			}
		}
		var r poolResult[R]
		if p.ctx.Err() != nil {
			r.err = context.Cause(p.ctx)
		} else {
			r.r = p.work(p.ctx, w, job.job)
		}
		if job.done != nil {
			p.mu.Lock()
			if p.keys[job.key] == job.done {
				delete(p.keys, job.key)
			}
			p.mu.Unlock()
			close(job.done)
		}
		p.put(job.seq, r)
	}
}

// put records a result and delivers every result that is next in order.
func (p *Pool[J, R]) put(seq int, r poolResult[R]) {
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
			p.err = r.err
			continue
		}
		if err := p.deliver(r.r); err != nil {
			p.err = err
		}
	}
}
