package printers

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/crdver/kubectl-crdver/manifest"
	"github.com/crdver/kubectl-crdver/progress"
)

// InputProgress shows a long read of documents on the shared progress display: in
// megabytes of the input files (so the bar has an ETA) with the objects counted beside, or, when
// the size is unknown (stdin, a URL, a pipe), in objects. The returned function stops it; it may be
// called more than once.
func InputProgress(p progress.Progress, paths []string, recursive bool, in *manifest.Progress, objects *atomic.Int64) func() {
	var files []string
	for _, path := range paths {
		f, err := manifest.ExpandPath(path, recursive)
		if err != nil {
			files = []string{"-"} // the read reports it; the size is unknown
			break
		}
		files = append(files, f...)
	}
	total := manifest.Size(files)
	t := progress.Task{Name: "previewing", Prefix: "preview", Unit: "objects", Total: -1, Done: objects.Load}
	if total > 0 {
		const mb = 1 << 20
		t.Unit, t.Total = "MiB", (total+mb-1)/mb
		t.Done = func() int64 { return in.Read.Load() / mb }
		t.Detail = func() string { return fmt.Sprintf("%d objects", objects.Load()) }
	}
	stop := p.Start(t)
	var once sync.Once
	return func() { once.Do(stop) }
}

// Bytes is n bytes for people: "512 bytes", "3.4 MiB", "1.2 GiB".
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
