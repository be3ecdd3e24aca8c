package preview

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// TestPoolOrder: results come to deliver in submission order whatever order the workers finish
// in, never more than the window of jobs is in flight, and each worker builds its Previewer once
// per CRD.
func TestPoolOrder(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "crds", "crontab.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	const workers, jobs = 4, 200
	var inFlight, maxInFlight atomic.Int64
	var got []int
	sameCached := true
	p := NewPool(context.Background(), workers, func(ctx context.Context, w *Worker, job int) int {
		defer inFlight.Add(-1)
		n := inFlight.Add(1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		a, err := w.Previewer(crd)
		if err != nil {
			t.Error(err)
			return job
		}
		if again, _ := w.Previewer(crd); again != a {
			sameCached = false
		}
		if job%7 == 0 {
			time.Sleep(time.Millisecond) // later jobs overtake this one
		}
		return job
	}, func(r int) error {
		got = append(got, r)
		return nil
	})
	for i := 0; i < jobs; i++ {
		if err := p.Submit(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(got) != jobs {
		t.Fatalf("%d results delivered, want %d", len(got), jobs)
	}
	for i, r := range got {
		if r != i {
			t.Fatalf("result %d delivered at position %d: out of order", r, i)
		}
	}
	if m := maxInFlight.Load(); m > workers {
		t.Errorf("%d jobs ran at once on %d workers", m, workers)
	}
	if !sameCached {
		t.Error("a worker built a second Previewer for the same CRD")
	}
}

// TestPoolErrors: deliver's first error stops the delivery of later results and is returned by
// Submit and Wait; a cancelled context makes Submit return its cause.
func TestPoolErrors(t *testing.T) {
	boom := errors.New("boom")
	var delivered []int
	p := NewPool(context.Background(), 2, func(_ context.Context, _ *Worker, job int) int { return job },
		func(r int) error {
			if r == 3 {
				return boom
			}
			delivered = append(delivered, r)
			return nil
		})
	var submitErr error
	for i := 0; i < 50 && submitErr == nil; i++ {
		submitErr = p.Submit(i)
	}
	if err := p.Wait(); !errors.Is(err, boom) {
		t.Errorf("Wait: %v, want boom", err)
	}
	if submitErr != nil && !errors.Is(submitErr, boom) {
		t.Errorf("Submit: %v, want boom or nil", submitErr)
	}
	if len(delivered) != 3 {
		t.Errorf("delivered %v, want 0 1 2 and nothing after the error", delivered)
	}

	cause := errors.New("stopped by the test")
	ctx, cancel := context.WithCancelCause(context.Background())
	block := make(chan struct{})
	q := NewPool(ctx, 1, func(_ context.Context, _ *Worker, job int) int { <-block; return job }, func(int) error { return nil })
	cancel(cause)
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		err = q.Submit(i)
	}
	close(block)
	if !errors.Is(err, cause) {
		t.Errorf("Submit after cancel: %v, want the context's cause", err)
	}
	if err := q.Wait(); err != nil && !errors.Is(err, cause) {
		t.Errorf("Wait after cancel: %v, want nil or the context's cause", err)
	}
}

// TestPoolKeyed: jobs of the same key never run at once and start in submission order, while
// jobs of other keys run beside them (more than one job in flight), and the results still come
// in submission order.
func TestPoolKeyed(t *testing.T) {
	const workers, jobs, keys = 4, 300, 5
	var mu sync.Mutex
	running := map[int]bool{} // key → a job of it is running
	last := map[int]int{}     // key → the last job of it started
	var inFlight, maxInFlight atomic.Int64
	var got []int
	p := NewPool(context.Background(), workers, func(_ context.Context, _ *Worker, job int) int {
		k := job % keys
		mu.Lock()
		if running[k] {
			t.Errorf("job %d started while another job of key %d ran", job, k)
		}
		if prev, ok := last[k]; ok && prev > job {
			t.Errorf("job %d of key %d started after job %d", job, k, prev)
		}
		running[k], last[k] = true, job
		mu.Unlock()
		n := inFlight.Add(1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		time.Sleep(time.Duration(job%3) * 100 * time.Microsecond)
		inFlight.Add(-1)
		mu.Lock()
		running[k] = false
		mu.Unlock()
		return job
	}, func(r int) error {
		got = append(got, r)
		return nil
	})
	for i := 0; i < jobs; i++ {
		if err := p.SubmitKeyed(strconv.Itoa(i%keys), i); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if r != i {
			t.Fatalf("result %d delivered at position %d: out of order", r, i)
		}
	}
	if len(got) != jobs {
		t.Fatalf("%d results, want %d", len(got), jobs)
	}
	if maxInFlight.Load() < 2 {
		t.Errorf("at most %d job ran at once: keys did not run beside each other", maxInFlight.Load())
	}
}
