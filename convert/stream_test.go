package convert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/crdver/kubectl-crdver/internal/testwebhook"
	"github.com/crdver/kubectl-crdver/manifest"
)

// TestPageGivesWhatTheReportKept: with Options.Page, each page's findings and the objects Keep
// would give are handed over as the page is done, and the report keeps none of them but counts
// them: the pages add up to the report of the same run without Page (per-object findings with
// strategy None; a bisection of a request the webhook failed as a whole).
func TestPageGivesWhatTheReportKept(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	for _, tc := range []struct {
		name    string
		options func() Options
		objects []Object
	}{
		{"strategy None", func() Options {
			return Options{CRD: loadCRD(t, "crontab.yaml"), To: "v1", RoundTrip: true}
		}, cronTabs(7)},
		{"bisected", func() Options {
			crd := webhookCRD(t, srv)
			return Options{CRD: crd, To: "v1", RoundTrip: true, Transport: transport(t, crd, TransportOptions{})}
		}, poisoned(7, 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.Set(testwebhook.FailBatchIf)
			defer srv.Set(testwebhook.Good)
			whole, err := RunSource(context.Background(), tc.options(), &pagedSource{objects: tc.objects, size: 3, srv: srv})
			if err != nil {
				t.Fatal(err)
			}
			var findings []Finding
			var kept []string
			pages := 0
			opts := tc.options()
			opts.Page = func(p PageResult) error {
				pages++
				if p.Report == nil || p.Report.CRD != whole.CRD || p.Report.To != "v1" {
					t.Errorf("page %d: report %+v", pages, p.Report)
				}
				findings = append(findings, p.Findings...)
				for _, k := range p.Keep {
					kept = append(kept, k.Source)
				}
				return nil
			}
			streamed, err := RunSource(context.Background(), opts, &pagedSource{objects: tc.objects, size: 3, srv: srv})
			if err != nil {
				t.Fatal(err)
			}
			var wantKept []string
			for _, k := range whole.Keep() {
				wantKept = append(wantKept, k.Source)
			}
			if len(whole.Findings) == 0 || len(wantKept) == 0 {
				t.Fatalf("the run found nothing to compare: %d findings, %d kept", len(whole.Findings), len(wantKept))
			}
			if pages != 3 {
				t.Errorf("%d pages given, want 3", pages)
			}
			if d := cmp.Diff(whole.Findings, findings); d != "" {
				t.Errorf("findings of the pages (-whole +pages):\n%s", d)
			}
			if d := cmp.Diff(wantKept, kept); d != "" {
				t.Errorf("objects to keep (-whole +pages):\n%s", d)
			}
			if len(streamed.Findings) != 0 || len(streamed.Failed) != 0 || len(streamed.Keep()) != 0 || streamed.FailedObjects != len(whole.Failed) {
				t.Errorf("the streamed report kept %d findings and %d failed objects, counts %d failed (want 0, 0, %d)", len(streamed.Findings), len(streamed.Failed), streamed.FailedObjects, len(whole.Failed))
			}
			if d := cmp.Diff(whole.Checks, streamed.Checks); d != "" || streamed.Objects != whole.Objects || streamed.Converted != whole.Converted {
				t.Errorf("counts differ (-whole +streamed):\n%s\nobjects %d/%d, converted %d/%d", d, whole.Objects, streamed.Objects, whole.Converted, streamed.Converted)
			}
		})
	}
}

// cancelAtPage is a source that cancels its context when its page n is asked for.
type cancelAtPage struct {
	pagedSource
	n      int
	cancel context.CancelFunc
}

func (c *cancelAtPage) Next(ctx context.Context) ([]Object, error) {
	if c.n--; c.n < 0 {
		c.cancel()
		return nil, ctx.Err()
	}
	return c.pagedSource.Next(ctx)
}

// TestRunSourceInterrupted: a run interrupted between pages returns the report of the pages
// done with the context's error.
func TestRunSourceInterrupted(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := &cancelAtPage{pagedSource: pagedSource{objects: cronTabs(10), size: 3, srv: srv}, n: 2, cancel: cancel}
	rep, err := RunSource(ctx, Options{CRD: loadCRD(t, "crontab.yaml"), To: "v1"}, src)
	if !errors.Is(err, context.Canceled) || rep == nil {
		t.Fatalf("interrupted run: report %v, error %v", rep != nil, err)
	}
	if rep.Objects != 6 || rep.FailedObjects+rep.Converted != 6 {
		t.Errorf("report of an interrupted run: %d objects (%d failed, %d converted), want the 6 of the two pages done", rep.Objects, rep.FailedObjects, rep.Converted)
	}
}

// TestDocumentSourcePages: documents read from a stream become pages of objects, each named by
// its document; a document that is not an object is an input error naming it.
func TestDocumentSourcePages(t *testing.T) {
	var in strings.Builder
	for i := 0; i < 1200; i++ {
		fmt.Fprintf(&in, "---\napiVersion: stable.example.com/v1beta1\nkind: CronTab\nmetadata: {name: ct-%d}\n", i)
	}
	docs := manifest.Open(context.Background(), []string{"-"}, manifest.Options{Stdin: strings.NewReader(in.String() + "---\n[1, 2]\n")})
	defer docs.Close()
	src := NewDocumentSource(docs, 500)
	var sizes []int
	for {
		page, err := src.Next(context.Background())
		if err != nil {
			var ie *manifest.InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), "stdin (document 1201)") {
				t.Errorf("error %v, want an input error naming stdin (document 1201)", err)
			}
			break
		}
		sizes = append(sizes, len(page))
		if page[0].Source != fmt.Sprintf("stdin (document %d)", 1+500*(len(sizes)-1)) {
			t.Errorf("page %d starts with %q", len(sizes), page[0].Source)
		}
	}
	if fmt.Sprint(sizes) != "[500 500]" || src.Read() != 1000 {
		t.Errorf("pages %v (%d read), want [500 500] before the error", sizes, src.Read())
	}
	if _, err := NewDocumentSource(manifest.Open(context.Background(), []string{"-"}, manifest.Options{Stdin: strings.NewReader("")}), 0).Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("empty input: %v, want io.EOF", err)
	}
}
