package pager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeList serves names page by page; its continue token is the index of the next item. fail
// answers the request with that index (and continue token) with an error instead.
type fakeList struct {
	names []string
	fail  map[string][]error // by continue token: errors to answer, one per request
	calls []metav1.ListOptions
}

func (f *fakeList) list(_ context.Context, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	f.calls = append(f.calls, o)
	if errs := f.fail[o.Continue]; len(errs) > 0 {
		f.fail[o.Continue] = errs[1:]
		return nil, errs[0]
	}
	start := 0
	if o.Continue != "" {
		fmt.Sscanf(o.Continue, "at-%d", &start)
	}
	end := min(start+int(o.Limit), len(f.names))
	l := &unstructured.UnstructuredList{}
	for _, n := range f.names[start:end] {
		u := unstructured.Unstructured{}
		u.SetName(n)
		l.Items = append(l.Items, u)
	}
	if end < len(f.names) {
		l.SetContinue(fmt.Sprintf("at-%d", end))
		rem := int64(len(f.names) - end)
		l.SetRemainingItemCount(&rem)
	}
	return l, nil
}

// expired is the 410 the API server answers a compacted continue token with, carrying the
// inconsistent token (empty: none).
func expired(token string) error {
	st := apierrors.NewResourceExpired("The provided continue parameter is too old")
	st.ErrStatus.ListMeta.Continue = token
	return st
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("obj-%02d", i)
	}
	return out
}

func drain(t *testing.T, p *Pager[*unstructured.UnstructuredList]) ([]string, error) {
	t.Helper()
	var got []string
	for {
		l, err := p.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		for _, u := range l.Items {
			got = append(got, u.GetName())
		}
	}
}

func TestPagerFollowsExpiredContinue(t *testing.T) {
	f := &fakeList{names: names(25), fail: map[string][]error{
		// The token of the third page expired; the server resumes after the last key returned.
		"at-20": {expired("at-20-inconsistent")},
	}}
	// The inconsistent token is another spelling of the same position.
	orig := f.list
	p := New(func(ctx context.Context, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
		if o.Continue == "at-20-inconsistent" {
			o.Continue = "at-20"
		}
		return orig(ctx, o)
	}, Options{Limit: 10})
	got, err := drain(t, p)
	if err != nil {
		t.Fatal(err)
	}
	if want := names(25); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listed %v, want every object once, in order: %v", got, want)
	}
	if p.Expired() != 1 || p.Pages() != 3 || p.Total() != 25 || p.Continue() != "" {
		t.Errorf("expired %d, pages %d, total %d, continue %q; want 1, 3, 25, \"\"", p.Expired(), p.Pages(), p.Total(), p.Continue())
	}
	if c := f.calls[len(f.calls)-1].Continue; c != "at-20" {
		t.Errorf("the last page was asked with %q, want the inconsistent token", c)
	}
}

func TestPagerExpiredWithoutToken(t *testing.T) {
	for name, token := range map[string]string{"none": "", "the same token": "at-10"} {
		t.Run(name, func(t *testing.T) {
			f := &fakeList{names: names(25), fail: map[string][]error{"at-10": {expired(token)}}}
			p := New(f.list, Options{Limit: 10})
			got, err := drain(t, p)
			var ee *ExpiredError
			if !errors.As(err, &ee) || !apierrors.IsResourceExpired(err) {
				t.Fatalf("err = %v, want an *ExpiredError wrapping the 410", err)
			}
			if len(got) != 10 || len(f.calls) != 2 {
				t.Errorf("listed %d objects in %d requests; want the first page only, and no restart from the beginning", len(got), len(f.calls))
			}
			if _, err := p.Next(context.Background()); !errors.Is(err, io.EOF) {
				t.Errorf("after the error Next = %v, want io.EOF", err)
			}
		})
	}
}

func TestPagerRetriesTransientErrors(t *testing.T) {
	f := &fakeList{names: names(15), fail: map[string][]error{
		"at-10": {apierrors.NewTooManyRequests("slow down", 0), apierrors.NewServiceUnavailable("busy")},
	}}
	waits := 0
	p := New(f.list, Options{Limit: 10, Wait: func(context.Context) error { waits++; return nil }})
	got, err := drain(t, p)
	if err != nil || len(got) != 15 {
		t.Fatalf("listed %d, err %v; want 15 objects after two retries", len(got), err)
	}
	if len(f.calls) != 4 || waits != 4 {
		t.Errorf("%d requests, %d waits; want 4 each (every request waits for the rate limit)", len(f.calls), waits)
	}

	// A permanent error is returned at once; so is a transient one after MaxAttempts.
	for name, tc := range map[string]struct {
		err   error
		calls int
	}{
		"forbidden": {apierrors.NewForbidden(schema.GroupResource{Resource: "widgets"}, "", errors.New("no")), 1},
		"503":       {apierrors.NewServiceUnavailable("busy"), 2},
	} {
		f := &fakeList{names: names(5), fail: map[string][]error{"": {tc.err, tc.err, tc.err}}}
		p := New(f.list, Options{MaxAttempts: 2})
		if _, err := drain(t, p); err == nil || len(f.calls) != tc.calls {
			t.Errorf("%s: err %v after %d requests; want the error after %d", name, err, len(f.calls), tc.calls)
		}
	}
}

func TestPagerStartsFromToken(t *testing.T) {
	f := &fakeList{names: names(25)}
	p := New(f.list, Options{Limit: 10, Continue: "at-20"})
	got, err := drain(t, p)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(names(25)[20:]) {
		t.Fatalf("listed %v, %v; want the objects after the token", got, err)
	}
	if p.Total() != -1 {
		t.Errorf("total = %d, want -1 (unknown: the list resumed)", p.Total())
	}
}

func TestPagerEmptyList(t *testing.T) {
	f := &fakeList{}
	p := New(f.list, Options{})
	l, err := p.Next(context.Background())
	if err != nil || len(l.Items) != 0 || p.Total() != 0 || f.calls[0].Limit != DefaultLimit {
		t.Fatalf("first page = %v, %v, total %d; want one empty page of limit %d, total 0", l, err, p.Total(), DefaultLimit)
	}
	if _, err := p.Next(context.Background()); !errors.Is(err, io.EOF) || len(f.calls) != 1 {
		t.Errorf("then %v after %d requests, want io.EOF without a request", err, len(f.calls))
	}
}

func TestPagerCancelled(t *testing.T) {
	f := &fakeList{names: names(5), fail: map[string][]error{"": {apierrors.NewServiceUnavailable("busy")}}}
	ctx, cancel := context.WithCancel(context.Background())
	p := New(func(c context.Context, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
		cancel() // Ctrl-C while the request is in flight: no back-off, no retry
		return f.list(c, o)
	}, Options{})
	start := time.Now()
	if _, err := p.Next(ctx); !errors.Is(err, context.Canceled) || time.Since(start) > time.Second || len(f.calls) != 1 {
		t.Errorf("Next = %v after %d requests; want context.Canceled at once", err, len(f.calls))
	}
}

func TestBackoffAndRetryable(t *testing.T) {
	gr := schema.GroupResource{Group: "g", Resource: "r"}
	for _, tc := range []struct {
		name      string
		err       error
		retryable bool
	}{
		{"429", apierrors.NewTooManyRequests("slow down", 2), true},
		{"503", apierrors.NewServiceUnavailable("busy"), true},
		{"500", apierrors.NewInternalError(context.DeadlineExceeded), true},
		{"server timeout", apierrors.NewServerTimeout(gr, "update", 1), true},
		{"transport", errors.New("connection reset by peer"), true},
		{"conflict", apierrors.NewConflict(gr, "x", nil), false},
		{"invalid", apierrors.NewBadRequest("no"), false},
		{"forbidden", apierrors.NewForbidden(gr, "x", nil), false},
		{"gone", expired("x"), false},
		{"cancelled", context.Canceled, false},
	} {
		if got := Retryable(tc.err); got != tc.retryable {
			t.Errorf("%s: Retryable = %v, want %v", tc.name, got, tc.retryable)
		}
	}
	if d := Backoff(apierrors.NewTooManyRequests("slow down", 2), 1); d.Seconds() != 2 {
		t.Errorf("Backoff with Retry-After 2 = %v, want 2s", d)
	}
	if d1, d3, d20 := Backoff(apierrors.NewServiceUnavailable("busy"), 1), Backoff(apierrors.NewServiceUnavailable("busy"), 3), Backoff(apierrors.NewServiceUnavailable("busy"), 20); d1.Milliseconds() != 100 || d3.Milliseconds() != 400 || d20.Seconds() != 5 {
		t.Errorf("exponential Backoff = %v, %v, %v; want 100ms, 400ms, 5s", d1, d3, d20)
	}
}

// A list the first page announces as larger than LargeList asks for pages of LargeLimit after
// it, when its page size is the default; a page size chosen otherwise is kept.
func TestPagerGrowsPagesOfLargeLists(t *testing.T) {
	for _, tc := range []struct {
		limit, want int64
		total       int
	}{
		{DefaultLimit, LargeLimit, LargeList + 1},
		{DefaultLimit, DefaultLimit, LargeList},
		{100, 100, LargeList + 1},
	} {
		f := &fakeList{names: names(tc.total)}
		p := New(f.list, Options{Limit: tc.limit})
		for i := 0; i < 3; i++ {
			if _, err := p.Next(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if got := []int64{f.calls[0].Limit, f.calls[1].Limit, f.calls[2].Limit}; got[0] != tc.limit || got[1] != tc.want || got[2] != tc.want {
			t.Errorf("%d objects, page size %d: asked for %v, want %d then %d", tc.total, tc.limit, got, tc.limit, tc.want)
		}
	}
}
