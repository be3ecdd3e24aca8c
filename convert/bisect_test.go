package convert

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// poisoned makes n CronTabs and marks those at the given indexes with the annotation the
// test webhook's fail-batch-if behaviours fail a whole request on.
func poisoned(n int, bad ...int) []Object {
	objs := cronTabs(n)
	for _, i := range bad {
		meta := objs[i].Object["metadata"].(map[string]any)
		meta["annotations"] = map[string]any{testwebhook.PoisonAnnotation: "true"}
	}
	return objs
}

// TestBisectNamesTheFailingObjects: a webhook that fails the whole request (result Failure, or
// HTTP 500) when any object has some property: the report names exactly the objects that
// have it, within a bounded number of extra requests, and Keep holds only them.
func TestBisectNamesTheFailingObjects(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crd := webhookCRD(t, srv)
	tr := transport(t, crd, TransportOptions{})
	cases := []struct {
		name      string
		behaviour testwebhook.Behaviour
		bad       []int
		check     string
	}{
		{"result Failure, 1 in 40", testwebhook.FailBatchIf, []int{23}, CheckResultStatus},
		{"HTTP 500, 1 in 40", testwebhook.Non200BatchIf, []int{0}, CheckHTTPStatus},
		{"result Failure, 2 in 40", testwebhook.FailBatchIf, []int{5, 30}, CheckResultStatus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.Set(tc.behaviour)
			defer srv.Set(testwebhook.Good)
			before := srv.Requests()
			rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", Transport: tr}, poisoned(40, tc.bad...))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, i := range tc.bad {
				want = append(want, cronTabs(40)[i].Source)
			}
			if len(rep.Bisections) != 1 {
				t.Fatalf("bisections: %+v", rep.Bisections)
			}
			b := rep.Bisections[0]
			if diff := cmp.Diff(want, b.Objects); diff != "" {
				t.Errorf("blamed objects (-want +got):\n%s", diff)
			}
			// Two requests per level of halving, per failing object: 2·⌈log2 40⌉ = 12 each.
			if !b.Complete || b.Check != tc.check || b.Requests == 0 || b.Requests > 12*len(tc.bad) {
				t.Errorf("bisection %+v: want complete, check %s, 1..%d requests", b, tc.check, 12*len(tc.bad))
			}
			if got := srv.Requests() - before; got != 1+b.Requests || rep.Requests != got {
				t.Errorf("server saw %d requests, report says %d, bisection %d", got, rep.Requests, b.Requests)
			}
			var kept []string
			for _, k := range rep.Keep() {
				kept = append(kept, k.Source)
				if k.Object == nil {
					t.Errorf("kept %s without its object", k.Source)
				}
			}
			if diff := cmp.Diff(want, kept); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			// The API server fails the whole list: every object of the request failed.
			if len(rep.Failed) != 40 || rep.Converted != 0 || rep.Problems() != 1 {
				t.Errorf("failed %d, converted %d, problems %d; want 40, 0, 1", len(rep.Failed), rep.Converted, rep.Problems())
			}
		})
	}
}

// TestBisectWayBack: a webhook that fails only the way back of a round trip (v1 -> v1beta1)
// when an object has the property: the bisection of the second request names it, and Keep
// holds the object as it was given (in v1beta1), so that it replays.
func TestBisectWayBack(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	srv.Set(testwebhook.FailBatchIf)
	srv.SetPoison(func(obj map[string]any) bool {
		meta, _ := obj["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		return obj["apiVersion"] == "stable.example.com/v1" && ann[testwebhook.PoisonAnnotation] != nil
	})
	crd := webhookCRD(t, srv)
	rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", RoundTrip: true, Transport: transport(t, crd, TransportOptions{})}, poisoned(16, 9))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Bisections) != 1 || rep.Bisections[0].Direction != "v1 -> v1beta1" || !rep.Bisections[0].Complete ||
		len(rep.Bisections[0].Objects) != 1 || rep.Bisections[0].Objects[0] != "default/crontab-9" {
		t.Fatalf("bisections %+v", rep.Bisections)
	}
	keep := rep.Keep()
	if len(keep) != 1 || keep[0].Object["apiVersion"] != "stable.example.com/v1beta1" {
		t.Errorf("keep %+v", keep)
	}
}

// TestBisectBounded: the request budget stops the search (and says so); a cancelled context
// stops it at once.
func TestBisectBounded(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	srv.Set(testwebhook.FailBatchIf)
	crd := webhookCRD(t, srv)
	tr := transport(t, crd, TransportOptions{})
	t.Run("budget", func(t *testing.T) {
		before := srv.Requests()
		rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", Transport: tr, BisectRequests: 3}, poisoned(40, 17))
		if err != nil {
			t.Fatal(err)
		}
		b := rep.Bisections[0]
		if b.Complete || b.Requests != 3 || srv.Requests()-before != 4 {
			t.Errorf("bisection %+v after %d requests: want incomplete after 3 more", b, srv.Requests()-before)
		}
		// The smallest failing set found still holds the object.
		found := false
		for _, o := range b.Objects {
			found = found || o == "default/crontab-17"
		}
		if !found || len(b.Objects) >= 40 {
			t.Errorf("objects %v", b.Objects)
		}
	})
	t.Run("budget spent: later requests keep all their objects", func(t *testing.T) {
		rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", Transport: tr, BatchSize: 20, BisectRequests: 4}, poisoned(40, 3, 25))
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Bisections) != 1 || rep.Bisections[0].Complete {
			t.Fatalf("bisections %+v: want one, stopped by the budget", rep.Bisections)
		}
		kept := map[string]bool{}
		for _, k := range rep.Keep() {
			kept[k.Source] = true
		}
		for i, o := range cronTabs(40) {
			inSecond := i >= 20
			if inSecond && !kept[o.Source] {
				t.Errorf("%s (request not bisected) is not kept", o.Source)
			}
		}
		for _, o := range rep.Bisections[0].Objects {
			if !kept[o] {
				t.Errorf("blamed %s is not kept", o)
			}
		}
		if len(kept) >= 40 {
			t.Errorf("kept all %d objects: the bisected request's cleared objects should not be", len(kept))
		}
	})
	t.Run("no bisection", func(t *testing.T) {
		rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", Transport: tr, BisectRequests: -1}, poisoned(40, 17))
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Bisections) != 0 || len(rep.Keep()) != 40 {
			t.Errorf("bisections %d, keep %d", len(rep.Bisections), len(rep.Keep()))
		}
	})
	t.Run("interrupt", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ct := &cancelAfter{Transport: tr, n: 3, cancel: cancel}
		before := srv.Requests()
		_, err := Run(ctx, Options{CRD: crd, To: "v1", Transport: ct}, poisoned(40, 17))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if got := srv.Requests() - before; got > 3 {
			t.Errorf("%d requests after the interrupt at the 3rd", got)
		}
	})
}

// cancelAfter cancels the run's context once n requests have been posted.
type cancelAfter struct {
	Transport
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Post(ctx context.Context, body []byte) (*HTTPResponse, error) {
	resp, err := c.Transport.Post(ctx, body)
	c.n--
	if c.n == 0 {
		c.cancel()
	}
	return resp, err
}

// pagedSource yields objects in pages and records, at each read, how many requests the
// webhook had served: a page must be sent before the next is read.
type pagedSource struct {
	objects  []Object
	size     int
	srv      *testwebhook.Server
	requests []int
}

func (p *pagedSource) Next(context.Context) ([]Object, error) {
	p.requests = append(p.requests, p.srv.Requests())
	if len(p.objects) == 0 {
		return nil, io.EOF
	}
	n := min(p.size, len(p.objects))
	page := p.objects[:n]
	p.objects = p.objects[n:]
	return page, nil
}

// TestRunSourcePageAtATime: each page is converted before the next is read (memory bounded
// by a page), and the report adds the pages up.
func TestRunSourcePageAtATime(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crd := webhookCRD(t, srv)
	src := &pagedSource{objects: poisoned(7, 4), size: 3, srv: srv}
	srv.Set(testwebhook.FailBatchIf)
	defer srv.Set(testwebhook.Good)
	before := srv.Requests()
	rep, err := RunSource(context.Background(), Options{CRD: crd, To: "v1", RoundTrip: true, Transport: transport(t, crd, TransportOptions{})}, src)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(src.requests); i++ {
		if src.requests[i] <= src.requests[i-1] {
			t.Errorf("page %d read before page %d was sent: requests at each read %v", i, i-1, src.requests)
		}
	}
	if rep.Objects != 7 || rep.Converted != 4 || len(rep.Failed) != 3 {
		t.Errorf("objects %d, converted %d, failed %d; want 7, 4, 3", rep.Objects, rep.Converted, len(rep.Failed))
	}
	// Page 2 (objects 3-5) failed as a whole; its bisection names object 4, with the
	// object's index in the whole input.
	if len(rep.Bisections) != 1 || len(rep.Bisections[0].Objects) != 1 || rep.Bisections[0].Objects[0] != "default/crontab-4" {
		t.Errorf("bisections %+v", rep.Bisections)
	}
	if rep.Failed[0].Source != "default/crontab-3" || srv.Requests()-before != rep.Requests {
		t.Errorf("failed %+v, requests %d/%d", rep.Failed, srv.Requests()-before, rep.Requests)
	}
}
