package migrate

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// netRetry repeats a request that failed on the way (a connection reset, a tunnel that broke,
// a response cut short) when repeating it cannot change data twice:
//   - reads (GET, HEAD) and every dry run (dryRun=All writes nothing);
//   - PUT: every update kubectl-crdver sends carries the resourceVersion it read, so a repeat
//     of one that went through is refused with 409 Conflict, which every caller takes as
//     "changed since read: read again";
//   - server-side apply (PATCH application/apply-patch+yaml): the same intent applied twice by
//     the same field manager gives the same object;
//   - access reviews (POST …accessreviews, …rulesreviews): questions, nothing is stored.
//
// The same requests are repeated when the answer says the server (or a load balancer before
// it) could not serve them now: 429 Too Many Requests, 502, 503 and 504, and a 500 whose
// message is etcd's timeout or leader change (transientStatus); a Retry-After is honoured up
// to 5 s. An error that is the request's own (a conversion webhook failing, 500 too) is not
// repeated.
//
// Creates, deletes and the other patches are never repeated here: their callers decide. The
// response body is read in full before it is returned (a page at most: lists are paged), so
// a response cut short is repeated too; watches pass through untouched. Client-go's own
// retries (a 429 with Retry-After, GETs on connection errors) still apply below this.
type netRetry struct {
	rt      http.RoundTripper
	retries *atomic.Int64
}

// netAttempts is the most tries of one request.
const netAttempts = 6

func (t netRetry) RoundTrip(req *http.Request) (*http.Response, error) {
	if !safeToRepeat(req) || req.URL.Query().Get("watch") == "true" || (req.Body != nil && req.GetBody == nil) {
		return t.rt.RoundTrip(req)
	}
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		r := req
		if attempt > 1 {
			r = req.Clone(ctx)
			if req.GetBody != nil {
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				r.Body = body
			}
		}
		resp, err := t.rt.RoundTrip(r)
		if err == nil {
			var b []byte
			b, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				resp.Body = io.NopCloser(bytes.NewReader(b))
				resp.ContentLength = int64(len(b))
				if !transientStatus(resp.StatusCode, b) || ctx.Err() != nil || attempt >= netAttempts {
					return resp, nil
				}
			}
		}
		if err != nil && (ctx.Err() != nil || attempt >= netAttempts) {
			return nil, err
		}
		t.retries.Add(1)
		d := 100 * time.Millisecond << (attempt - 1)
		if err == nil {
			d = max(d, retryAfter(resp))
		}
		if err := Sleep(ctx, d); err != nil {
			return nil, err
		}
	}
}

func safeToRepeat(req *http.Request) bool {
	if strings.Contains(req.URL.RawQuery, "dryRun=All") {
		return true
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut:
		return true
	case http.MethodPatch:
		return strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch")
	case http.MethodPost:
		// An access review is a question, not a write: nothing is stored.
		return strings.HasSuffix(req.URL.Path, "accessreviews") || strings.HasSuffix(req.URL.Path, "rulesreviews")
	}
	return false
}

// Retries is how many requests of these clients were sent again after the network failed
// them (netRetry): the figure the reports give.
func (c *Clients) Retries() int64 {
	if c == nil || c.retries == nil {
		return 0
	}
	return c.retries.Load()
}

// transientStatus: the answer says "not now", not "not this request" (see netRetry).
func transientStatus(code int, body []byte) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusInternalServerError:
		return bytes.Contains(body, []byte("etcdserver: request timed out")) || bytes.Contains(body, []byte("etcdserver: leader changed")) ||
			bytes.Contains(body, []byte("etcdserver: too many requests"))
	}
	return false
}

// retryAfter is the answer's Retry-After in seconds, at most 5 s (0 without one).
func retryAfter(resp *http.Response) time.Duration {
	n, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || n <= 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, 5*time.Second)
}
