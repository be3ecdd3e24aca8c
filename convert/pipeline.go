package convert

// pipeline.go: the requests of a page: batches sent one at a time, in order, as the API
// server does for a list, while earlier responses are checked; the round trip back.

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// batch is one group of objects on its way there (leg 1) and, for round trips, back (leg 2).
type batch struct {
	items    []*item
	from     string
	x1, x2   *exchange
	out      []map[string]any // leg 1 results, aligned with items
	back     []*item          // leg 2 items
	backOrig []*item          // the original of each leg 2 item
	t1, t2   *tally
	checked1 chan struct{}
}

// exchange is one ConversionReview request and what came back.
type exchange struct {
	items    []*item
	from, to string
	number   int
	uid      types.UID
	resp     *HTTPResponse
	err      error
	buildErr error
	// whole is the finding of a failure of the request as a whole (set by check).
	whole *Finding
}

// pipeline sends the requests one at a time, in order, as the API server does for a list,
// while the responses already received are checked on other goroutines: leg 1 of batch i+1
// goes out while batch i is checked; leg 2 of batch i goes out once its leg 1 is checked.
func (r *runner) pipeline(ctx context.Context, batches []*batch) error {
	sem := make(chan struct{}, 2) // checks in flight besides the requests
	var wg sync.WaitGroup
	check := func(fn func()) {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn()
		}()
	}
	sendLeg2 := func(b *batch) {
		<-b.checked1
		if len(b.back) == 0 || r.stop {
			return
		}
		b.x2 = r.post(ctx, b.back, b.from, r.opts.To)
		check(func() {
			res := r.check(b.x2, b.t2)
			for i, o := range res {
				back, orig := b.back[i], b.backOrig[i]
				orig.failed = orig.failed || back.failed
				orig.wholeFailed = orig.wholeFailed || back.wholeFailed
				if o == nil {
					continue
				}
				r.compareRoundTrip(b.t2, b.backOrig[i], o)
			}
		})
	}
	// The total to send, when the source knows it: the objects it holds less those skipped
	// (all known for a single page).
	total := 0
	if r.total > 0 {
		total = max(r.total-r.report.Skipped, 0)
	}
	progress := func(b *batch) {
		r.done += len(b.items)
		if r.opts.Progress != nil {
			t := total
			if t > 0 && r.done > t {
				t = r.done
			}
			r.opts.Progress(r.done, t)
		}
	}
	var prev *batch
	for _, b := range batches {
		if err := ctx.Err(); err != nil {
			wg.Wait()
			return err
		}
		if r.stop {
			break
		}
		b.checked1 = make(chan struct{})
		b.x1 = r.post(ctx, b.items, r.opts.To, b.from)
		check(func() {
			defer close(b.checked1)
			b.out = r.check(b.x1, b.t1)
			if !r.opts.RoundTrip {
				return
			}
			for i, o := range b.out {
				if o == nil {
					continue
				}
				raw := b.items[i].convRaw
				if !b.items[i].reusable {
					var err error
					if raw, err = json.Marshal(o); err != nil {
						b.items[i].failed = true
						continue
					}
				}
				b.back = append(b.back, &item{index: b.items[i].index, source: b.items[i].source, version: r.opts.To, orig: o, raw: raw, original: b.items[i].orig, input: b.items[i]})
				b.backOrig = append(b.backOrig, b.items[i])
			}
		})
		if !r.opts.RoundTrip {
			progress(b)
		} else if prev != nil {
			sendLeg2(prev)
			progress(prev)
		}
		prev = b
	}
	if r.opts.RoundTrip && prev != nil && prev.checked1 != nil {
		sendLeg2(prev)
		progress(prev)
	}
	wg.Wait()
	return ctx.Err()
}

// post sends one ConversionReview (not for strategy None). It runs on the requesting
// goroutine only: requests go one at a time.
func (r *runner) post(ctx context.Context, items []*item, to, from string) *exchange {
	x := &exchange{items: items, from: from, to: to}
	if r.none {
		return x
	}
	x.uid = r.newUID()
	raws := make([][]byte, len(items))
	for i, it := range items {
		raws[i] = it.raw
	}
	body, err := BuildReview(r.review, x.uid, r.apiVersion(to), raws)
	if err != nil {
		x.buildErr = err
		return x
	}
	r.requests++
	x.number = r.requests
	start := time.Now()
	x.resp, x.err = r.opts.Transport.Post(ctx, body)
	if x.err == nil {
		r.tally.latencies = append(r.tally.latencies, time.Since(start))
		return x
	}
	var te *TransportError
	if !errors.As(x.err, &te) || !te.Timeout {
		r.stop = true
		r.report.Unreachable = x.err.Error()
		if te != nil {
			r.report.UnreachableError = te
		}
	}
	return x
}
