package migrate

import (
	"net/http"
	"sync/atomic"
)

// throttleCounter counts the API server's 429 answers. Client-go retries a 429 that carries
// Retry-After by itself, so the engine never sees those errors; the adaptive in-flight limit
// still has to hear that the server's flow control said no.
type throttleCounter struct {
	rt    http.RoundTripper
	count *atomic.Int64
}

func (t throttleCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		t.count.Add(1)
	}
	return resp, err
}

// Throttled is the number of 429 answers the API server gave these clients so far (including
// those client-go retried by itself): a Gate's throttle signal.
func (c *Clients) Throttled() int64 {
	if c == nil || c.throttled == nil {
		return 0
	}
	return c.throttled.Load()
}
