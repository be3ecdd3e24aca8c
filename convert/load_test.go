package convert

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// A webhook that adds 60 ms to every answer is over the one-object budget (50 ms) and within
// the namespace list's (1 s): the verdicts follow the budget, not the size.
func TestLoadVerdictsFollowTheBudget(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	srv.SetLatency(60 * time.Millisecond)
	crd := webhookCRD(t, srv)
	tr := transport(t, crd, TransportOptions{})
	objs := cronTabs(7)
	rep, err := Load(context.Background(), LoadOptions{CRD: crd, To: "v1", Transport: tr, Sizes: KEP95Sizes[:2], Requests: 5}, objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sizes) != 2 {
		t.Fatalf("sizes: %+v", rep.Sizes)
	}
	one, ns := rep.Sizes[0], rep.Sizes[1]
	if one.Verdict != VerdictOver || one.Requests != 5 || one.Latency.P50 < 60 {
		t.Errorf("one object: %+v, want over with p50 >= 60 ms", one)
	}
	if ns.Verdict != VerdictWithin || ns.Requests != 5 || ns.Latency.P99 > 1000 {
		t.Errorf("1,500 objects: %+v, want within", ns)
	}
	if !rep.Over() {
		t.Error("Over() = false with a size over its budget")
	}
	if rep.Objects != 7 || rep.ObjectBytes == 0 || ns.RequestBytes < 1500*rep.ObjectBytes {
		t.Errorf("objects %d, %d bytes each, request %d bytes", rep.Objects, rep.ObjectBytes, ns.RequestBytes)
	}
	// One untimed request per size, then the timed ones; every uid fresh (the response-uid
	// check passed for each).
	if got := srv.Requests(); got != 12 {
		t.Errorf("the webhook served %d requests, want 12 (2 sizes x (1 + 5))", got)
	}
	for _, c := range rep.Checks {
		if c.Failed > 0 {
			t.Errorf("check %s failed %d time(s): %+v", c.Name, c.Failed, rep.Findings)
		}
		if c.Name == CheckResponseUID && c.Passed != 12 {
			t.Errorf("response-uid passed %d times, want 12", c.Passed)
		}
	}
	srv.SetLatency(0)
	rep, err = Load(context.Background(), LoadOptions{CRD: crd, To: "v1", Transport: tr, Sizes: KEP95Sizes[:1], Requests: 3}, objs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Over() || rep.Sizes[0].Verdict != VerdictWithin {
		t.Errorf("no latency: %+v, want within", rep.Sizes[0])
	}
}

// A wrong answer fails the size whatever its latency; the first answer of each size is
// checked object by object.
func TestLoadWrongAnswers(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crd := webhookCRD(t, srv)
	tr := transport(t, crd, TransportOptions{})
	for _, tc := range []struct {
		b      testwebhook.Behaviour
		check  string
		failed int // requests counted wrong: every timed one when the envelope is wrong, else the first answer
	}{
		{testwebhook.WrongUID, CheckResponseUID, 4},
		{testwebhook.WrongCount, CheckObjectCount, 4},
		{testwebhook.Rename, CheckNameUnchanged, 1},
		{testwebhook.ChangeMetadata, "", 0}, // a warning: the API server restores metadata
	} {
		t.Run(string(tc.b), func(t *testing.T) {
			srv.Set(tc.b)
			rep, err := Load(context.Background(), LoadOptions{CRD: crd, To: "v1", Transport: tr, Sizes: KEP95Sizes[:1], Requests: 3}, cronTabs(2))
			if err != nil {
				t.Fatal(err)
			}
			failed := failedLoadChecks(rep)
			if tc.check != "" && failed[tc.check] == 0 {
				t.Errorf("check %s did not fail: %+v", tc.check, rep.Checks)
			}
			want := VerdictFailed
			if tc.failed == 0 {
				want = VerdictWithin
			}
			if got := rep.Sizes[0]; got.Verdict != want || got.Failed != tc.failed {
				t.Errorf("verdict %s with %d wrong answer(s), want %s with %d", got.Verdict, got.Failed, want, tc.failed)
			}
		})
	}
	srv.Set(testwebhook.Good)
}

func failedLoadChecks(r *LoadReport) map[string]int {
	out := map[string]int{}
	for _, c := range r.Checks {
		out[c.Name] += c.Failed
	}
	return out
}

// Unreachable: the run stops and says so; interrupted: ctx's error.
func TestLoadUnreachableAndInterrupted(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crd := webhookCRD(t, srv)
	tr := transport(t, crd, TransportOptions{})
	srv.Close()
	rep, err := Load(context.Background(), LoadOptions{CRD: crd, To: "v1", Transport: tr, Requests: 2}, cronTabs(1))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unreachable == "" || rep.Sizes[0].Verdict != VerdictNotRun {
		t.Errorf("unreachable %q, verdict %s", rep.Unreachable, rep.Sizes[0].Verdict)
	}

	srv = testwebhook.StartForTest(t, testwebhook.Options{})
	srv.SetLatency(200 * time.Millisecond)
	crd = webhookCRD(t, srv)
	tr = transport(t, crd, TransportOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Load(ctx, LoadOptions{CRD: crd, To: "v1", Transport: tr, Requests: 100}, cronTabs(1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("interrupted run: err %v, want the context's", err)
	}
}
