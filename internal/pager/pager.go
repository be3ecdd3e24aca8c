// Package pager lists the objects of one resource a page at a time (limit and continue): the
// one pager every full list of kubectl-crdver goes through (plan's, the preflight's, the
// rewrite's and its count, the managedFields census, the backup, convert --from-cluster).
// Memory is a page, whatever the number of objects.
//
// A continue token names a revision of etcd. When etcd has compacted past it (the API server
// compacts every five minutes, and a list of a million objects takes longer), the next page
// is answered 410 Gone with a fresh "inconsistent" continue token in the error's ListMeta: the
// list resumes after the last key returned, at the current revision. Pager follows that token,
// as kube-storage-version-migrator does, and never restarts the list (a restart reads every
// object again, and a client that falls back to one unpaged list can exhaust etcd's memory:
// kubernetes#118776). Objects changed meanwhile are listed as they are now; none is skipped
// (keys are listed in order) and none is listed twice. Transient errors (429, 5xx, timeouts,
// transport errors) are retried after the server's Retry-After or an exponential back-off.
//
// The package also holds that retry rule (Retryable, Backoff, Sleep), which every request of a
// long run shares.
package pager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

// DefaultLimit is the page size when Options.Limit is 0 (what kubectl and
// kube-storage-version-migrator use).
const DefaultLimit = 500

// DefaultMaxAttempts bounds the requests for one page when Options.MaxAttempts is 0.
const DefaultMaxAttempts = 8

// A list of more than LargeList objects (as its first page announces) asks for pages of
// LargeLimit after its first, when its page size is DefaultLimit: read from etcd, each page
// costs the API server a count of the rest of the list (etcd's range count, for
// remainingItemCount), so at a million objects a page of 500 costs three times what it costs at
// 10,000; pages of 2,000 read the million 3.3 times as fast (docs/benchmarks.md, "At cluster
// scale"), for a few tens of MB more of a page in memory.
const (
	LargeList  = 200000
	LargeLimit = 2000
)

// Options tune a Pager.
type Options struct {
	// Limit is the page size (0: DefaultLimit; a large list's pages grow: LargeList).
	Limit int64
	// Continue starts the list after the pages a continue token of an earlier list names (a
	// checkpoint's); "" starts from the beginning. An expired one is followed as any other.
	Continue string
	// LabelSelector selects the objects listed ("" for all).
	LabelSelector string
	// Wait, when set, is called before each request (a client-side rate limit).
	Wait func(ctx context.Context) error
	// MaxAttempts bounds the requests for one page on transient errors (0: DefaultMaxAttempts).
	MaxAttempts int
}

// List is a page as the API server returns it: UnstructuredList, PartialObjectMetadataList.
type List interface {
	runtime.Object
	GetContinue() string
	GetRemainingItemCount() *int64
}

// Lister asks the API server for one page.
type Lister[L List] func(ctx context.Context, opts metav1.ListOptions) (L, error)

// Pager hands out the pages of one list in order. It is not safe for concurrent use.
type Pager[L List] struct {
	list    Lister[L]
	o       Options
	cont    string
	started bool
	done    bool
	total   int64
	pages   int64
	expired int64
}

// New makes a pager over list.
func New[L List](list Lister[L], o Options) *Pager[L] {
	if o.Limit <= 0 {
		o.Limit = DefaultLimit
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	return &Pager[L]{list: list, o: o, cont: o.Continue, started: o.Continue != "", total: -1}
}

// Dynamic pages through ri with the dynamic client (whole objects).
func Dynamic(ri dynamic.ResourceInterface, o Options) *Pager[*unstructured.UnstructuredList] {
	return New(ri.List, o)
}

// Metadata pages through ri with the metadata client (metadata only: a cheaper answer, for
// counts and the managedFields census).
func Metadata(ri metadata.ResourceInterface, o Options) *Pager[*metav1.PartialObjectMetadataList] {
	return New(ri.List, o)
}

// ExpiredError is a continue token that expired (410) without a token to resume from: the
// list cannot go on without starting again, which Pager never does by itself.
type ExpiredError struct {
	Err error
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("the list's continue token expired and the API server gave none to resume from: %v", e.Err)
}

func (e *ExpiredError) Unwrap() error { return e.Err }

// Next returns the next page as the API server returned it (the last one may be empty: a
// list of no object is one empty page), or io.EOF after the last one.
func (p *Pager[L]) Next(ctx context.Context) (L, error) {
	var zero L
	if p.done || (p.started && p.cont == "") {
		p.done = true
		return zero, io.EOF
	}
	for attempt := 1; ; {
		if p.o.Wait != nil {
			if err := p.o.Wait(ctx); err != nil {
				return zero, err
			}
		} else if err := ctx.Err(); err != nil {
			return zero, err
		}
		list, err := p.list(ctx, metav1.ListOptions{Limit: p.o.Limit, Continue: p.cont, LabelSelector: p.o.LabelSelector})
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return zero, ctx.Err()
			case (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) && p.cont != "":
				next := expiredContinue(err)
				if next == "" || next == p.cont {
					p.done = true
					return zero, &ExpiredError{Err: err}
				}
				p.cont = next // objects changed since are listed as they are now
				p.expired++
				continue
			case Retryable(err) && attempt < p.o.MaxAttempts:
				if err := Sleep(ctx, Backoff(err, attempt)); err != nil {
					return zero, err
				}
				attempt++
				continue
			}
			return zero, err
		}
		if !p.started {
			n := int64(meta.LenList(list))
			if r := list.GetRemainingItemCount(); r != nil {
				p.total = n + *r
			} else if list.GetContinue() == "" {
				p.total = n
			}
			if p.total > LargeList && p.o.Limit == DefaultLimit {
				p.o.Limit = LargeLimit
			}
		}
		p.started = true
		p.pages++
		p.cont = list.GetContinue()
		return list, nil
	}
}

// Continue is the token of the page after the last one returned ("" once the list is done, or
// before the first page of a list that starts from the beginning): what a checkpoint keeps.
func (p *Pager[L]) Continue() string { return p.cont }

// Total is the number of objects the first page announced (remainingItemCount plus its own),
// -1 before it, when the API server did not say, or when the list resumed from a token.
func (p *Pager[L]) Total() int64 { return p.total }

// Pages is the number of pages handed out.
func (p *Pager[L]) Pages() int64 { return p.pages }

// Expired is the number of expired continue tokens followed (410 Gone, resumed from the
// inconsistent token the API server returned with it).
func (p *Pager[L]) Expired() int64 { return p.expired }

// expiredContinue is the continue token a 410 on a paged list carries: the API server's
// "inconsistent continue" token that resumes after the last key returned.
func expiredContinue(err error) string {
	var s apierrors.APIStatus
	if !errors.As(err, &s) {
		return ""
	}
	return s.Status().ListMeta.Continue
}

// Each lists every page of p and calls fn with each.
func Each[L List](ctx context.Context, p *Pager[L], fn func(L) error) error {
	for {
		l, err := p.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(l); err != nil {
			return err
		}
	}
}

// Retryable reports whether err is worth retrying after a back-off: throttled (429), server
// errors (5xx), timeouts, transport errors. Lists, rewrites and dry runs retry alike.
func Retryable(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code == 429 || code >= 500 || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err)
	}
	return !errors.Is(err, context.Canceled)
}

// Backoff is how long to wait before attempt+1 after err: the server's Retry-After, else
// doubling from 100 ms up to 5 s.
func Backoff(err error, attempt int) time.Duration {
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		return time.Duration(s) * time.Second
	}
	d := 100 * time.Millisecond << (attempt - 1)
	if d > 5*time.Second || d <= 0 {
		d = 5 * time.Second
	}
	return d
}

// Sleep waits d, or until ctx is done (then its error), so that Ctrl-C is never held up by a
// back-off.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
