package migrate

// budget.go: what a rewrite of every object of a CRD will ask of the cluster, worked out
// before its first write, so that the person about to rewrite a million objects knows how
// long it takes at the rate the API server writes now, how much it writes into etcd and how
// full etcd already is, and which of the API server's flow-control limits the writes meet.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// MinBudgetObjects is the smallest rewrite a Budget is worked out for: a smaller one takes
// seconds and writes little.
const MinBudgetObjects = 1000

// budgetSample is how many objects the budget's rate is measured with (dry-run writes), and
// budgetInFlight how many of them are in flight at once.
const (
	budgetSample   = 200
	budgetInFlight = 16
)

// Budget is what a rewrite of a CRD's objects will ask of the cluster (see above). A figure
// that could not be read is zero and Unknown says why: nothing is assumed.
type Budget struct {
	CRD     string `json:"crd"`
	Version string `json:"version"`
	Objects int64  `json:"objects"`
	// AverageBytes is the mean size of an object in JSON, as the API server returns it (etcd
	// holds custom resources as JSON: about what each rewrite of one writes there), over
	// SampleObjects objects.
	AverageBytes  int64 `json:"averageBytes"`
	SampleObjects int   `json:"sampleObjects"`
	// WriteBytes is Objects × AverageBytes: what the rewrite writes into etcd. Each write is a
	// new revision; the old ones stay until the API server compacts etcd (every 5 minutes by
	// default), so the backend grows by up to that much before compaction frees it.
	WriteBytes int64 `json:"writeBytes"`
	// RatePerSecond is the rate the API server wrote a sample of the objects at, as dry-run
	// writes (RateSample of them, budgetInFlight in flight: a dry run costs the server what
	// a write does, but the etcd write and the watch event); Seconds is Objects at that rate.
	RatePerSecond float64 `json:"ratePerSecond,omitempty"`
	RateSample    int     `json:"rateSample,omitempty"`
	RateInFlight  int     `json:"rateInFlight,omitempty"`
	Seconds       float64 `json:"seconds,omitempty"`
	// StorageBytes is the size of etcd's database as the API server reports it
	// (apiserver_storage_size_bytes: the file allocated), 0 when it could not be read. etcd's
	// quota cannot be read through the API server: it is unknown (etcd's default is 2 GiB,
	// --quota-backend-bytes sets it; past it etcd refuses every write).
	StorageBytes int64 `json:"storageBytes,omitempty"`
	// FlowControl is the API server's priority and fairness as the rewrite's requests meet it
	// (nil when it could not be read).
	FlowControl *FlowControl `json:"flowControl,omitempty"`
	// Unknown says what could not be read, and why.
	Unknown []string `json:"unknown,omitempty"`

	seats []sampleValue // apiserver_flowcontrol_nominal_limit_seats, per priority level
}

// FlowControl is the FlowSchema the API server classified this client's requests into and its
// priority level's limits (flowcontrol.apiserver.k8s.io/v1).
type FlowControl struct {
	FlowSchema    string `json:"flowSchema"`
	PriorityLevel string `json:"priorityLevel"`
	// Exempt: the level is not limited.
	Exempt bool `json:"exempt,omitempty"`
	// NominalSeats is the level's concurrency limit (apiserver_flowcontrol_nominal_limit_seats:
	// requests it serves at once; 0 when the metric could not be read).
	NominalSeats int64 `json:"nominalSeats,omitempty"`
	// LimitResponse is Queue or Reject: what happens to a request beyond the seats. Queues,
	// QueueLengthLimit and HandSize are the queuing's (Queue only).
	LimitResponse    string `json:"limitResponse,omitempty"`
	Queues           int32  `json:"queues,omitempty"`
	QueueLengthLimit int32  `json:"queueLengthLimit,omitempty"`
	HandSize         int32  `json:"handSize,omitempty"`
}

// flowRecorder keeps the flow schema and priority level the API server says it classified the
// last request into (response headers X-Kubernetes-PF-FlowSchema-UID and
// X-Kubernetes-PF-PriorityLevel-UID).
type flowRecorder struct {
	rt   http.RoundTripper
	seen *atomic.Pointer[[2]string]
}

func (t flowRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err == nil {
		fs, pl := resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID), resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)
		if fs != "" || pl != "" {
			t.seen.Store(&[2]string{fs, pl})
		}
	}
	return resp, err
}

// EstimateBudget works out the Budget of rewriting the objects of crd (objects of them) at
// version: a sample of them listed and sent as dry-run writes (nothing is written), the API
// server's metrics and its flow-control configuration. It returns nil below
// MinBudgetObjects. It fails only when ctx ends.
func EstimateBudget(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, version string, objects int64) (*Budget, error) {
	if objects < MinBudgetObjects {
		return nil, nil
	}
	b := &Budget{CRD: crd.Name, Version: version, Objects: objects}
	ri := c.Dynamic.Resource(crdinfo.GVR(crd, version))
	list, err := ri.List(ctx, metav1.ListOptions{Limit: budgetSample})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.Unknown = append(b.Unknown, fmt.Sprintf("the size of the objects and the write rate: listing %s at %s: %v", crd.Name, version, err))
	} else {
		b.sample(ctx, ri, list.Items)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	b.metrics(ctx, c)
	b.flowControl(ctx, c)
	return b, ctx.Err()
}

// sample measures the objects' size and the rate the API server writes them at.
func (b *Budget) sample(ctx context.Context, ri dynamic.NamespaceableResourceInterface, items []unstructured.Unstructured) {
	var total int64
	for i := range items {
		if j, err := json.Marshal(items[i].Object); err == nil {
			total += int64(len(j))
		}
	}
	if len(items) > 0 {
		b.SampleObjects = len(items)
		b.AverageBytes = total / int64(len(items))
		b.WriteBytes = b.AverageBytes * b.Objects
	}
	work := make(chan *unstructured.Unstructured)
	var wg sync.WaitGroup
	var sent, forbidden atomic.Int64
	start := time.Now()
	for w := 0; w < budgetInFlight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range work {
				var w dynamic.ResourceInterface = ri
				if ns := u.GetNamespace(); ns != "" {
					w = ri.Namespace(ns)
				}
				_, err := w.Update(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
				if apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "admission") {
					forbidden.Add(1)
				}
				sent.Add(1)
			}
		}()
	}
	for i := range items {
		select {
		case work <- &items[i]:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	switch {
	case ctx.Err() != nil:
	case forbidden.Load() > 0:
		b.Unknown = append(b.Unknown, "the write rate: a dry-run write needs update rights on "+b.CRD)
	case sent.Load() > 0 && elapsed > 0:
		b.RateSample, b.RateInFlight = int(sent.Load()), budgetInFlight
		b.RatePerSecond = float64(sent.Load()) / elapsed.Seconds()
		b.Seconds = float64(b.Objects) / b.RatePerSecond
	}
}

// metrics reads etcd's size from the API server's metrics.
func (b *Budget) metrics(ctx context.Context, c *Clients) {
	m, err := readMetrics(ctx, c, "apiserver_storage_size_bytes", "apiserver_flowcontrol_nominal_limit_seats")
	if err != nil {
		b.Unknown = append(b.Unknown, fmt.Sprintf("etcd's size: the API server's metrics could not be read (%v)", err))
		return
	}
	for _, s := range m["apiserver_storage_size_bytes"] {
		b.StorageBytes = max(b.StorageBytes, int64(s.value))
	}
	if b.StorageBytes == 0 {
		b.Unknown = append(b.Unknown, "etcd's size: the API server does not report apiserver_storage_size_bytes")
	}
	b.seats = m["apiserver_flowcontrol_nominal_limit_seats"]
}

// flowControl reads the flow schema and priority level this client's requests were classified
// into, and that level's limits.
func (b *Budget) flowControl(ctx context.Context, c *Clients) {
	var seen [2]string
	if c.flow != nil {
		if p := c.flow.Load(); p != nil {
			seen = *p
		}
	}
	if seen[0] == "" && seen[1] == "" {
		b.Unknown = append(b.Unknown, "flow control: the API server did not say which priority level serves these requests (API priority and fairness off?)")
		return
	}
	fc := &FlowControl{}
	fsl, err := c.Kube.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, fs := range fsl.Items {
			if string(fs.UID) == seen[0] {
				fc.FlowSchema = fs.Name
			}
		}
	}
	pll, err2 := c.Kube.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	if err2 == nil {
		for _, pl := range pll.Items {
			if string(pl.UID) != seen[1] {
				continue
			}
			fc.PriorityLevel = pl.Name
			fc.Exempt = pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt
			if l := pl.Spec.Limited; l != nil {
				fc.LimitResponse = string(l.LimitResponse.Type)
				if q := l.LimitResponse.Queuing; q != nil {
					fc.Queues, fc.QueueLengthLimit, fc.HandSize = q.Queues, q.QueueLengthLimit, q.HandSize
				}
			}
		}
	}
	if err != nil || err2 != nil {
		b.Unknown = append(b.Unknown, fmt.Sprintf("flow control: the FlowSchemas and PriorityLevelConfigurations could not be read (%v)", firstErr(err, err2)))
	}
	for _, s := range b.seats {
		if fc.PriorityLevel != "" && s.labels["priority_level"] == fc.PriorityLevel {
			fc.NominalSeats = int64(s.value)
		}
	}
	b.FlowControl = fc
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// sampleValue is one sample of a metric.
type sampleValue struct {
	labels map[string]string
	value  float64
}

// readMetrics reads the API server's /metrics and returns the samples of the metrics named.
func readMetrics(ctx context.Context, c *Clients, names ...string) (map[string][]sampleValue, error) {
	raw, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]sampleValue{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		for _, n := range names {
			rest, ok := strings.CutPrefix(line, n)
			if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
				continue
			}
			s := sampleValue{labels: map[string]string{}}
			if lb, after, ok := strings.Cut(strings.TrimPrefix(rest, "{"), "}"); ok && rest[0] == '{' {
				for _, kv := range strings.Split(lb, ",") {
					if k, v, ok := strings.Cut(kv, "="); ok {
						s.labels[k] = strings.Trim(v, `"`)
					}
				}
				rest = after
			}
			f := strings.Fields(rest)
			if len(f) == 0 {
				continue
			}
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				s.value = v
				out[n] = append(out[n], s)
			}
		}
	}
	return out, sc.Err()
}

// budgetVersion is the version a rewrite to target writes at: target when served (the
// rewrite reads and writes at the storage version), else the version the CRD is read at.
func budgetVersion(crd *apiextensionsv1.CustomResourceDefinition, target string) string {
	if crdinfo.IsServed(crd, target) {
		return target
	}
	v, _ := crdinfo.AccessVersion(crd)
	return v
}
