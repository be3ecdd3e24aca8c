package plugin

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// loadRow matches a size's row of the --load table: objects, requests and verdict.
func loadRow(objects, verdict string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + objects + `\s+.*\s+\d+\s+[0-9.]+ms\s+[0-9.]+ms\s+[0-9.]+ms\s+\S+\s+` + verdict + `$`)
}

// TestConvertLoad: the test webhook with 60 ms added to every answer is over the one-object
// budget (50 ms: exit 1) and within the namespace list's (1 s); without the delay it is within
// both (exit 0). Table, JSON and Markdown.
func TestConvertLoad(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crdFile := writeCRD(t, webhookCRD(t, srv, ""))
	args := []string{"convert", "--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "--load", "--load-sizes", "1,1500", "--load-requests", "5"}

	srv.SetLatency(60 * time.Millisecond)
	got := run(t, "", args...)
	if got.code != 1 {
		t.Fatalf("exit %d, want 1 (one object over budget)\n%s%s", got.code, got.stdout, got.stderr)
	}
	if !loadRow("1", "over").MatchString(got.stdout) || !loadRow("1500", "within").MatchString(got.stdout) {
		t.Errorf("want 1 over and 1500 within:\n%s", got.stdout)
	}
	mustContain(t, "stdout", got.stdout, "budget: the CRD GA scale targets (KEP-95), judged on p99; the webhook does not meet it at 1 object(s) per request")
	mustContain(t, "stderr", got.stderr, "error: crontabs.stable.example.com: the conversion webhook does not meet the API server's budget: 1 object(s) over")

	js := run(t, "", append(args, "-o", "json")...)
	var rep convert.LoadReport
	if err := json.Unmarshal([]byte(js.stdout), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, js.stdout)
	}
	if js.code != 1 || len(rep.Sizes) != 2 || rep.Sizes[0].Verdict != "over" || rep.Sizes[1].Verdict != "within" ||
		rep.Sizes[0].BudgetMs != 50 || rep.Sizes[1].BudgetMs != 1000 || rep.Sizes[0].Latency.P50 < 60 || rep.Sizes[1].Requests != 5 {
		t.Errorf("-o json: exit %d, %+v", js.code, rep.Sizes)
	}
	md := run(t, "", append(args, "-o", "markdown")...)
	mustContain(t, "-o markdown", md.stdout, "### crontabs.stable.example.com: conversion webhook latency against the API server's budget",
		"| Objects | As in | Requests | p50 | p99 | Budget | Verdict |", "| 50ms | **over** |", "| 1s | within |")

	srv.SetLatency(0)
	got = run(t, "", args...)
	if got.code != 0 {
		t.Fatalf("exit %d, want 0 without the delay\n%s%s", got.code, got.stdout, got.stderr)
	}
	if !loadRow("1", "within").MatchString(got.stdout) || !loadRow("1500", "within").MatchString(got.stdout) {
		t.Errorf("want both within:\n%s", got.stdout)
	}
	mustContain(t, "stdout", got.stdout, "the webhook meets it at every size measured")

	// A wrong answer fails the size, whatever the latency.
	srv.Set(testwebhook.WrongUID)
	got = run(t, "", args...)
	srv.Set(testwebhook.Good)
	if got.code != 1 || !strings.Contains(got.stdout, "failed (6 answer(s) wrong)") {
		t.Errorf("wrong uid: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
}

func TestConvertLoadUsage(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crdFile := writeCRD(t, webhookCRD(t, srv, ""))
	base := []string{"convert", "--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--load", "--round-trip"}, "--round-trip, --via-apiserver, --keep and --strict do not apply to --load"},
		{[]string{"--load", "--load-sizes", "200"}, "--load-sizes 200: the CRD GA scale budget has sizes 1, 1500 and 10000 only"},
		{[]string{"--load-requests", "10"}, "--load-sizes, --load-requests and --load-duration go with --load"},
		{[]string{"--load", "--load-requests", "0"}, "--load-requests 0: want at least 1"},
		{[]string{"--load", "--write"}, "--load times the webhook; --write and --check work on files: choose one"},
	} {
		got := run(t, "", append(base, tc.args...)...)
		if got.code != 2 || !strings.Contains(got.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tc.args, got.code, got.stderr, tc.want)
		}
	}
	none := run(t, "", "convert", "--crd-file", repoFile("testdata", "crds", "crontab.yaml"), "--to", "v1", "-f", cronTabsV1beta1, "--load")
	if none.code != 2 || !strings.Contains(none.stderr, "spec.conversion.strategy is None: there is no webhook to load") {
		t.Errorf("strategy None: exit %d, %q", none.code, none.stderr)
	}
}

// Ctrl-C ends a load run at once (the request in flight is cancelled), exit 3.
func TestConvertLoadInterrupted(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	srv.SetLatency(2 * time.Second)
	crdFile := writeCRD(t, webhookCRD(t, srv, ""))
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	root := NewRootCmd(streams)
	root.SetArgs([]string{"convert", "--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "--load", "-q"})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	start := time.Now()
	err := root.ExecuteContext(ctx)
	// 3 sizes x 101 requests of 2 s each would take 10 minutes; the bound only shows the run
	// did not wait for the request in flight.
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("interrupted run took %s", took)
	}
	if ExitCode(err) != 3 || out.Len() != 0 {
		t.Errorf("exit %d (%v), stdout %q; want 3 and nothing printed", ExitCode(err), err, out.String())
	}
}
