package plugin

import (
	"context"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkDoctor500 runs `doctor` over every CRD of the local API server holding 500 CRDs
// (benchCRD: three versions × 40-field schema, no webhooks, no objects) (target: under 10 s).
// The CRDs are created once, before timing.
func BenchmarkDoctor500(b *testing.B) {
	ctx := context.Background()
	cs, err := newCRDClient(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	const n = 500
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				_, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, benchCRD(i), metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- err
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := env.WaitEstablished(ctx, benchCRD(i).Name); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := runCluster(b, "doctor", "-q")
		if r.code != 0 {
			b.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
}
