package convert

// pipeline.go: the requests of a page: batches prepared ahead, sent one at a time as the API
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
	// prepared is closed once the items are ready to send (prepErr: they cannot be);
	// inputPruned counts those whose own schema pruned something of the input.
	prepared    chan struct{}
	prepErr     error
	inputPruned int
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

// Pipeline depth. The requests go one at a time; what is around them runs on other
// goroutines so that the requesting one waits for the webhook only:
//   - prepareAhead batches are made ready to send (copied, pruned, defaulted, encoded) ahead of
//     the request that sends them;
//   - up to leg2Window batches may have their way there sent and their way back not yet (a
//     round trip's way back waits for the check of its way there);
//   - checkWorkers responses are checked at once.
//
// Memory stays bounded by the page, which holds every object of these batches anyway.
const (
	prepareAhead = 2
	leg2Window   = 3
	checkWorkers = 2
)

// pipeline sends the requests one at a time, in order, as the API server does for a list,
// while the batches to come are prepared and the responses already received are checked on
// other goroutines: the way there of the next batch goes out while earlier ones are checked,
// and a round trip's way back goes out as soon as its way there is checked (the oldest
// first), so the requesting goroutine waits for a check only when leg2Window batches are
// waiting for theirs.
func (r *runner) pipeline(ctx context.Context, batches []*batch) error {
	done := make(chan struct{})
	defer close(done)
	ahead := r.prepareBatches(batches, done)

	sem := make(chan struct{}, checkWorkers)
	var wg sync.WaitGroup
	check := func(fn func()) { // never blocks the requesting goroutine
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
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
	checked := func(b *batch) bool {
		select {
		case <-b.checked1:
			return true
		default:
			return false
		}
	}
	var waiting []*batch // round trips: the way there sent, the way back not yet; oldest first
	next := 0
	for !r.stop {
		if err := ctx.Err(); err != nil {
			wg.Wait()
			return err
		}
		if len(waiting) > 0 && (checked(waiting[0]) || next == len(batches) || len(waiting) >= leg2Window) {
			b := waiting[0]
			waiting = waiting[1:]
			sendLeg2(b)
			progress(b)
			continue
		}
		if next == len(batches) {
			break
		}
		b := batches[next]
		next++
		<-b.prepared
		if b.prepErr != nil {
			wg.Wait()
			return b.prepErr
		}
		b.checked1 = make(chan struct{})
		b.x1 = r.post(ctx, b.items, r.opts.To, b.from)
		<-ahead // one more batch may be prepared
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
		if r.opts.RoundTrip {
			waiting = append(waiting, b)
		} else {
			progress(b)
		}
	}
	// Stopped (the webhook is unreachable): the ways back still waiting are not sent.
	for _, b := range waiting {
		<-b.checked1
		progress(b)
	}
	wg.Wait()
	return ctx.Err()
}

// prepareBatches makes the batches ready to send, in order, on another goroutine, at most
// prepareAhead batches ahead of the requests: the requesting goroutine receives from the
// returned channel after each batch it sends. Each batch's prepared is closed when it is ready
// (prepErr set when it cannot be). It stops when done is closed.
func (r *runner) prepareBatches(batches []*batch, done <-chan struct{}) <-chan struct{} {
	ahead := make(chan struct{}, prepareAhead)
	for _, b := range batches {
		b.prepared = make(chan struct{})
	}
	go func() {
		for _, b := range batches {
			select {
			case ahead <- struct{}{}:
			case <-done:
				return
			}
			for _, it := range b.items {
				pruned, err := r.encode(it)
				if err != nil {
					b.prepErr = err
					break
				}
				if pruned {
					b.inputPruned++
				}
			}
			close(b.prepared)
		}
	}()
	return ahead
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
