package convert

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	kjson "sigs.k8s.io/json"

	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// BenchmarkRoundTrip10k compares a checked round trip of 10,000 CronTabs (v1beta1 -> v1 ->
// v1beta1, batches of 500, through the local HTTPS test webhook) with a bare loop that POSTs
// the same batches and only decodes the responses. The difference is the cost of checking.
// "local" is the webhook as is, in the same process; "latency=2ms" adds 2 ms to every answer,
// standing for the network to a webhook in a pod.
//
//	go test ./convert/ -run '^$' -bench RoundTrip10k -benchtime 5x -count 5
func BenchmarkRoundTrip10k(b *testing.B) {
	for _, latency := range []time.Duration{0, 2 * time.Millisecond} {
		name := "local"
		if latency > 0 {
			name = "latency=" + latency.String()
		}
		b.Run(name, func(b *testing.B) { benchmarkRoundTrip(b, latency) })
	}
}

func benchmarkRoundTrip(b *testing.B, latency time.Duration) {
	srv, err := testwebhook.Start(testwebhook.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	srv.SetLatency(latency)
	crd := webhookCRD(b, srv)
	tr, err := NewHTTPTransport(crd, TransportOptions{})
	if err != nil {
		b.Fatal(err)
	}
	objs := cronTabs(10000)
	ctx := context.Background()

	b.Run("checked", func(b *testing.B) {
		cpu0 := cpuTime()
		for b.Loop() {
			rep, err := Run(ctx, Options{CRD: crd, To: "v1", RoundTrip: true, Transport: tr}, objs)
			if err != nil {
				b.Fatal(err)
			}
			if rep.Problems() != 0 || rep.Converted != len(objs) {
				b.Fatalf("converted %d, problems %d", rep.Converted, rep.Problems())
			}
		}
		b.ReportMetric(float64(len(objs)*b.N)/b.Elapsed().Seconds(), "objects/s")
		b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
	})

	b.Run("bare", func(b *testing.B) {
		post := func(batch [][]byte, to string) [][]byte { return barePost(b, ctx, tr, batch, to) }
		cpu0 := cpuTime()
		for b.Loop() {
			// A bare client too starts from objects in memory: encode them.
			raws := make([][]byte, len(objs))
			for i, o := range objs {
				raws[i], _ = json.Marshal(o.Object)
			}
			for start := 0; start < len(raws); start += DefaultBatchSize {
				batch := raws[start:min(start+DefaultBatchSize, len(raws))]
				back := post(batch, "stable.example.com/v1")
				if got := post(back, "stable.example.com/v1beta1"); len(got) != len(batch) {
					b.Fatal(fmt.Sprint("got ", len(got)))
				}
			}
		}
		b.ReportMetric(float64(len(objs)*b.N)/b.Elapsed().Seconds(), "objects/s")
		b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
	})
}

// cpuTime is the process's user+system CPU time (the webhook runs in the same process).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// barePost is the bare client the benchmarks compare convert with: one ConversionReview POSTed,
// its response and each converted object decoded, nothing checked.
func barePost(b *testing.B, ctx context.Context, tr Transport, batch [][]byte, to string) [][]byte {
	body, err := BuildReview("v1", uuid.NewUUID(), to, batch)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := tr.Post(ctx, body)
	if err != nil {
		b.Fatal(err)
	}
	var rev reviewResponse
	if err := kjson.UnmarshalCaseSensitivePreserveInts(resp.Body, &rev); err != nil {
		b.Fatal(err)
	}
	out := make([][]byte, len(rev.Response.ConvertedObjects))
	for i, o := range rev.Response.ConvertedObjects {
		var m map[string]any
		if err := kjson.UnmarshalCaseSensitivePreserveInts(o, &m); err != nil {
			b.Fatal(err)
		}
		out[i] = o
	}
	return out
}
