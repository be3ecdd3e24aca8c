package convert

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// manifestFolder writes files files of perFile CronTabs each (v1beta1, each with a comment and
// a ConfigMap between them) and returns their contents by path.
func manifestFolder(b *testing.B, files, perFile int) (string, map[string][]byte) {
	dir := b.TempDir()
	out := map[string][]byte{}
	for f := 0; f < files; f++ {
		var s strings.Builder
		fmt.Fprintf(&s, "# team %d's backups\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-%d\ndata:\n  a: \"1\"\n", f, f)
		for i := 0; i < perFile; i++ {
			n := f*perFile + i
			fmt.Fprintf(&s, "---\n# backup %d\napiVersion: stable.example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: crontab-%d\n  namespace: default\n  labels:\n    app: backup\nspec:\n  cronSpec: \"*/5 * * * *\" # every five minutes\n  image: backup:1.2\n  replicas: 2\n  hostPort: db-%d.example.com:5432\n", n, n, n)
		}
		p := filepath.Join(dir, fmt.Sprintf("team-%04d.yaml", f))
		out[p] = []byte(s.String())
		if err := os.WriteFile(p, out[p], 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir, out
}

// peakHeap samples the heap in use every 5 ms while f runs and returns the peak, in bytes.
func peakHeap(f func()) uint64 {
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	return peak.Load()
}

// BenchmarkWrite10k: convert --write of 10,000 CronTabs in 1,000 files (10 a file, with
// comments and a ConfigMap each) through the HTTPS test webhook on loopback, every object
// converted, round-tripped, judged on the create path and written; next to a bare loop that
// POSTs the same ConversionReviews (one per file and direction, 10 objects each) and only
// decodes the answers. "files=100" is a tenth of the objects, for the peak heap: memory is
// bounded by a file, not by the folder.
//
//	go test ./convert/ -run '^$' -bench Write10k -benchtime 3x
func BenchmarkWrite10k(b *testing.B) {
	srv, err := testwebhook.Start(testwebhook.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	crd := webhookCRD(b, srv)
	tr, err := NewHTTPTransport(crd, TransportOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, files := range []int{100, 1000} {
		b.Run(fmt.Sprintf("write/files=%d", files), func(b *testing.B) {
			dir, orig := manifestFolder(b, files, 10)
			var peak uint64
			var busy time.Duration
			for b.Loop() {
				b.StopTimer()
				for p, data := range orig {
					if err := os.WriteFile(p, data, 0o644); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				start := time.Now()
				var rep *WriteReport
				h := peakHeap(func() {
					rep, err = Write(ctx, WriteOptions{Options: Options{CRD: crd, To: "v1", Transport: tr}, Files: []string{dir}})
				})
				busy += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				if rep.Converted != files*10 || rep.Problems() != 0 {
					b.Fatalf("converted %d, problems %d", rep.Converted, rep.Problems())
				}
				peak = max(peak, h)
			}
			b.ReportMetric(float64(files*10*b.N)/busy.Seconds(), "objects/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
	b.Run("bare/files=1000", func(b *testing.B) {
		_, orig := manifestFolder(b, 1000, 10)
		post := func(batch [][]byte, to string) [][]byte { return barePost(b, ctx, tr, batch, to) }
		// The same objects as JSON, a batch per file (reading and parsing the files is left
		// out: the bare loop is only the requests).
		var batches [][][]byte
		for _, data := range orig {
			var batch [][]byte
			r := newDocReader(bytes.NewReader(data))
			for d, err := r.next(); err == nil; d, err = r.next() {
				js, err := sigsyaml.YAMLToJSON(d.text)
				if err != nil {
					b.Fatal(err)
				}
				if strings.Contains(string(js), `"kind":"CronTab"`) {
					batch = append(batch, js)
				}
			}
			batches = append(batches, batch)
		}
		for b.Loop() {
			for _, batch := range batches {
				back := post(batch, "stable.example.com/v1")
				if got := post(back, "stable.example.com/v1beta1"); len(got) != len(batch) {
					b.Fatalf("got %d", len(got))
				}
			}
		}
		b.ReportMetric(float64(10000*b.N)/b.Elapsed().Seconds(), "objects/s")
	})
}

// BenchmarkWriteOneFile: convert --write of one file of CronTabs (~175 bytes each, v1beta1 →
// v1, strategy None: only the apiVersion lines change) of 2 MB and 20 MB (CRDVER_BENCH_WRITE_MB
// sets another size, e.g. 200), its results read back as the plugin prints them (every
// object's row and the diff, to io.Discard; ",o=yaml": as -o yaml writes them, WriteYAML).
// peak-heap-MB is the heap in use at its highest: the same at every size (a batch of
// documents; the results and the diff go to a spill, and are printed as they are read back).
//
//	go test ./convert/ -run '^$' -bench WriteOneFile -benchtime 1x
func BenchmarkWriteOneFile(b *testing.B) {
	crd := loadCRD(b, "crontab.yaml")
	sizes := []int{2, 20}
	if s := os.Getenv("CRDVER_BENCH_WRITE_MB"); s != "" {
		var mb int
		if _, err := fmt.Sscan(s, &mb); err != nil || mb <= 0 {
			b.Fatalf("CRDVER_BENCH_WRITE_MB=%q: a number of MB", s)
		}
		sizes = []int{mb}
	}
	rows := func(_ *WriteReport, f FileResult) error {
		if err := f.EachObject(func(ObjectResult) error { return nil }); err != nil {
			return err
		}
		return f.WriteDiff(io.Discard)
	}
	asYAML := func(_ *WriteReport, f FileResult) error { return f.WriteYAML(io.Discard) }
	for _, mb := range sizes {
		for _, out := range []struct {
			name    string
			printed func(*WriteReport, FileResult) error
		}{{"", rows}, {",o=yaml", asYAML}} {
			printed := out.printed
			b.Run(fmt.Sprintf("MB=%d%s", mb, out.name), func(b *testing.B) {
				// The input is made on disk and copied before each run: the heap holds none of it.
				dir := b.TempDir()
				src, path := filepath.Join(dir, "input"), filepath.Join(dir, "crontabs.yaml")
				out, err := os.Create(src)
				if err != nil {
					b.Fatal(err)
				}
				bw := bufio.NewWriter(out)
				n := 0
				for size := 0; size < mb<<20; n++ {
					k, _ := fmt.Fprintf(bw, "---\n# backup %d\napiVersion: stable.example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: ct-%07d\n  namespace: default\nspec:\n  cronSpec: \"* * * * */5\"\n  image: my-cron-image\n", n, n)
					size += k
				}
				if err := errors.Join(bw.Flush(), out.Close()); err != nil {
					b.Fatal(err)
				}
				var peak uint64
				var busy time.Duration
				for b.Loop() {
					b.StopTimer()
					if err := copyFile(src, path); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					start := time.Now()
					var rep *WriteReport
					h := peakHeap(func() {
						rep, err = Write(context.Background(), WriteOptions{Options: Options{CRD: crd, To: "v1"}, Files: []string{path}, File: printed})
					})
					busy += time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
					if rep.Converted != n || rep.Written() != 1 {
						b.Fatalf("converted %d of %d, written %d", rep.Converted, n, rep.Written())
					}
					peak = max(peak, h)
				}
				b.ReportMetric(float64(n*b.N)/busy.Seconds(), "objects/s")
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			})
		}
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
