package webhookcheck

import (
	"context"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// BenchmarkRoundTrip10k is the round trip plan and doctor make of stored objects (RoundTrip:
// convert's checked round trip, a page at a time, with the objects sorted into failures,
// losses and warnings) of 10,000 CronTabs, v1beta1 -> v1 -> v1beta1, batches of 500, through
// the HTTPS test webhook on loopback (in this process). Compare its objects/s with convert's
// bare POST loop on the same objects and webhook (docs/benchmarks.md#the-releases-conversion):
//
//	go test ./webhookcheck/ -run '^$' -bench RoundTrip10k -benchtime 5x -count 3
//	go test ./convert/ -run '^$' -bench 'RoundTrip10k/local' -benchtime 5x -count 3
func BenchmarkRoundTrip10k(b *testing.B) {
	srv, err := testwebhook.Start(testwebhook.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	crd := testenv.LoadCRD(b, "crontab-webhook.yaml")
	crd.Spec.Conversion = srv.WebhookConversion("v1")
	tr, err := Transport(context.Background(), crd, nil, Reach{})
	if err != nil {
		b.Fatal(err)
	}
	objs := cronTabs(10000)
	const page = 500
	cpu0 := cpuTime()
	for b.Loop() {
		res, err := RoundTrip(context.Background(), RoundTripOptions{CRD: crd, Transport: tr, Pairs: []Pair{{From: "v1beta1", To: "v1"}}, BatchSize: page,
			List: func(string) convert.Source { return &pages{objs: objs, n: page} }})
		if err != nil {
			b.Fatal(err)
		}
		if res.Objects != int64(len(objs)) || res.FailedCount+res.LossCount != 0 {
			b.Fatalf("round-tripped %d, failed %d, lost %d", res.Objects, res.FailedCount, res.LossCount)
		}
	}
	b.ReportMetric(float64(len(objs)*b.N)/b.Elapsed().Seconds(), "objects/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
}

// pages hands out objs n at a time, as a list of the cluster does.
type pages struct {
	objs []convert.Object
	n    int
}

func (p *pages) Next(context.Context) ([]convert.Object, error) {
	if len(p.objs) == 0 {
		return nil, io.EOF
	}
	k := min(p.n, len(p.objs))
	out := p.objs[:k]
	p.objs = p.objs[k:]
	return out, nil
}

func (p *pages) Total() int { return len(p.objs) }

// cpuTime is the process's user+system CPU time (the webhook runs in the same process).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
