package printers

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crdver/kubectl-crdver/manifest"
	"github.com/crdver/kubectl-crdver/progress"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestInputProgressLines: off a terminal, a stream of unknown size shows plain lines with the
// object count and rate (total "?", never "/-1"); files show MiB of the total with the objects.
func TestInputProgressLines(t *testing.T) {
	for name, tc := range map[string]struct {
		paths []string
		want  string
	}{
		"stdin": {[]string{"-"}, "preview: 42/? objects, "},
		"file":  {[]string{"../testdata/crds/widget.yaml"}, "/1 MiB (42 objects), "},
	} {
		t.Run(name, func(t *testing.T) {
			var out lockedBuffer
			var objects atomic.Int64
			objects.Store(42)
			stop := InputProgress(progress.New(&out, false, 10*time.Millisecond), tc.paths, false, &manifest.Progress{}, &objects)
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(out.String(), "\n") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			stop()
			stop() // twice is fine
			got := out.String()
			if !strings.Contains(got, tc.want) || strings.Contains(got, "/-1") {
				t.Errorf("progress lines %q, want %q and no /-1", got, tc.want)
			}
		})
	}
}
