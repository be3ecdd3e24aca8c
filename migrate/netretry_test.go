package migrate

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestNetRetryStatuses: what netRetry repeats when the answer is an error status — the
// client logic only (the server is a stub; TestServerErrors in e2e/survive runs it against a
// real API server behind a proxy that fails requests).
func TestNetRetryStatuses(t *testing.T) {
	for _, tc := range []struct {
		name        string
		method, ct  string
		code        int
		body        string
		wantTries   int64
		wantFinalOK bool
	}{
		{"429 on a GET is repeated", http.MethodGet, "", 429, "too many requests", 2, true},
		{"503 on a PUT is repeated", http.MethodPut, "application/json", 503, "no healthy upstream", 2, true},
		{"500 etcd timeout on an apply is repeated", http.MethodPatch, "application/apply-patch+yaml", 500, `{"message":"etcdserver: request timed out"}`, 2, true},
		{"500 of a conversion webhook is not", http.MethodGet, "", 500, `{"message":"conversion webhook for x failed"}`, 1, false},
		{"503 on a create is not", http.MethodPost, "application/json", 503, "no healthy upstream", 1, false},
		{"503 on an access review is repeated", http.MethodPost, "application/json", 503, "no healthy upstream", 2, true},
		{"503 on a merge patch is not", http.MethodPatch, "application/merge-patch+json", 503, "no healthy upstream", 1, false},
		{"409 is not", http.MethodPut, "application/json", 409, "conflict", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				if r.Method != http.MethodGet && string(b) != "body" {
					t.Errorf("try %d: body %q, want the request's body again", calls.Load()+1, b)
				}
				if calls.Add(1) == 1 {
					w.WriteHeader(tc.code)
					_, _ = io.WriteString(w, tc.body)
					return
				}
				_, _ = io.WriteString(w, "ok")
			}))
			defer srv.Close()
			var retries atomic.Int64
			c := &http.Client{Transport: netRetry{rt: http.DefaultTransport, retries: &retries}}
			var body io.Reader
			if tc.method != http.MethodGet {
				body = strings.NewReader("body")
			}
			url := srv.URL
			if strings.Contains(tc.name, "access review") {
				url += "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
			}
			req, err := http.NewRequest(tc.method, url, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if calls.Load() != tc.wantTries || (resp.StatusCode == 200) != tc.wantFinalOK || retries.Load() != tc.wantTries-1 {
				t.Errorf("%d tries (retries counted %d), final status %d; want %d tries, final ok %v", calls.Load(), retries.Load(), resp.StatusCode, tc.wantTries, tc.wantFinalOK)
			}
		})
	}
}
