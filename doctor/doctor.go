// Package doctor checks the health of every CRD of a cluster, read-only: storage (pending
// migrations, stale managedFields), conversion webhooks (endpoints, certificates, a real
// ConversionReview round trip), schemas (structural, CEL cost against the API server's limit)
// and versions. It returns findings as data; the plugin prints them.
package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/kubeversion"
)

// Severities of findings.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
	SeverityInfo    = "info"
)

// Checks (the "check" of a finding).
const (
	CheckStorage  = "storage"
	CheckWebhook  = "webhook"
	CheckSchema   = "schema"
	CheckVersions = "versions"
)

// Finding is one thing found about a CRD.
type Finding struct {
	Check    string `json:"check"`
	Severity string `json:"severity"`
	// Message is one line saying what is wrong (or, for info, what is so).
	Message string `json:"message"`
	// Fix is the command (or step) that fixes it; empty when there is nothing to do.
	Fix string `json:"fix"`
}

// Item is the findings of one CRD, errors first.
type Item struct {
	CRD      string    `json:"crd"`
	Findings []Finding `json:"findings"`
}

// Rank orders CRDs for tables and comments: errors first, then warnings, then other findings, then
// those without any.
func (it Item) Rank() int {
	rank := 3
	for _, f := range it.Findings {
		switch f.Severity {
		case SeverityError:
			rank = min(rank, 0)
		case SeverityWarning:
			rank = min(rank, 1)
		default:
			rank = min(rank, 2)
		}
	}
	return rank
}

// Incomplete is a check that could not be completed: its answer is unknown.
type Incomplete struct {
	CRD   string `json:"crd"`
	Check string `json:"check"`
	Error string `json:"error"`
}

// Summary counts the findings of a run.
type Summary struct {
	CRDs     int `json:"crds"`
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Infos    int `json:"infos"`
	// Incomplete lists the checks whose answer is unknown (the run could not complete them).
	Incomplete []Incomplete `json:"incomplete"`
}

// Report is the result of a run. Its JSON shape is stable (docs/commands/doctor.md, "Output and JSON shape").
type Report struct {
	Items   []Item  `json:"items"`
	Summary Summary `json:"summary"`
	// KubernetesVersion is the version the checks were judged as (the cluster's, or
	// --kube-version; "1.37").
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
}

// Options of a run.
type Options struct {
	// Config reaches the API server (for metadata lists, object reads, services and
	// endpointslices, and the service proxy).
	Config *rest.Config
	// AllCRDs are every CRD of the cluster, for the group's preferred version (nil: the CRDs
	// checked).
	AllCRDs []*apiextensionsv1.CustomResourceDefinition
	// Concurrency is how many CRDs are checked at once (0: 8).
	Concurrency int
	// ChunkSize is the page size of the metadata-only lists (0: 500).
	ChunkSize int64
	// WebhookTimeout bounds each call to a webhook (0: 10s).
	WebhookTimeout time.Duration
	// SkipRoundTrip leaves out the ConversionReview round trip (and so sends no
	// ConversionReview to webhooks).
	SkipRoundTrip bool
	// Now is the clock for certificate expiry (nil: time.Now).
	Now func() time.Time
	// Progress, when set, is called after each CRD with the number done and the total; it is
	// called from one goroutine at a time.
	Progress func(done, total int)
	// Read, when set, is told how many objects the checks read since they last told it (each
	// object of the managedFields census, each page of the data-loss reads): the count of
	// objects read so far is the sum. It is called from the goroutines that check CRDs side by
	// side: it must be safe for concurrent use.
	Read func(n int64)
	// KubeVersion is the Kubernetes version the API server's code runs as for the schema
	// checks (the CEL environment): the process must run as it (kubeversion.Use, chosen once
	// per run by the caller; Run refuses another with a *kubeversion.NotInUseError). Zero: the
	// version the process runs as.
	KubeVersion kubeversion.Version
}

// clients are what the checks use.
type clients struct {
	md   metadata.Interface
	dyn  dynamic.Interface
	core kubernetes.Interface
}

// Run checks crds and returns the report. It returns an error only when it cannot start
// (bad configuration) or ctx ends; a check that fails to complete is listed in
// Summary.Incomplete.
func Run(ctx context.Context, opts Options, crds []*apiextensionsv1.CustomResourceDefinition) (*Report, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = 500
	}
	if opts.WebhookTimeout <= 0 {
		opts.WebhookTimeout = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AllCRDs == nil {
		opts.AllCRDs = crds
	}
	if _, err := kubeversion.Require(opts.KubeVersion); err != nil {
		return nil, err
	}
	var c clients
	var err error
	if opts.Config != nil {
		cfg := rest.CopyConfig(opts.Config)
		// Reading deprecated versions is the point here: their warnings are not news.
		cfg.WarningHandler = rest.NoWarnings{}
		if c.md, err = metadata.NewForConfig(cfg); err != nil {
			return nil, err
		}
		if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
			return nil, err
		}
		if c.core, err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	preferred := preferredVersions(opts.AllCRDs)

	results := make([]crdResult, len(crds))
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for w := 0; w < opts.Concurrency && w < len(crds); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				results[i] = checkCRD(ctx, opts, c, crds[i], preferred[crds[i].Spec.Group])
				if opts.Progress != nil {
					mu.Lock()
					done++
					opts.Progress(done, len(crds))
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for i := range crds {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	sharedWebhooks(crds, results)
	r := &Report{Items: make([]Item, 0, len(crds)), Summary: Summary{CRDs: len(crds), Incomplete: []Incomplete{}}}
	for i, res := range results {
		sortFindings(res.findings)
		if res.findings == nil {
			res.findings = []Finding{}
		}
		r.Items = append(r.Items, Item{CRD: crds[i].Name, Findings: res.findings})
		for _, f := range res.findings {
			switch f.Severity {
			case SeverityError:
				r.Summary.Errors++
			case SeverityWarning:
				r.Summary.Warnings++
			default:
				r.Summary.Infos++
			}
		}
		r.Summary.Incomplete = append(r.Summary.Incomplete, res.incomplete...)
	}
	sort.SliceStable(r.Items, func(i, j int) bool { return r.Items[i].CRD < r.Items[j].CRD })
	return r, nil
}

// crdResult is what the checks of one CRD found.
type crdResult struct {
	findings   []Finding
	incomplete []Incomplete
	// webhook is the endpoint of the CRD's conversion webhook ("" for none); objects is the
	// number of objects counted (-1 unknown).
	webhook string
	objects int64
}

// checker collects the findings of one CRD.
type checker struct {
	ctx  context.Context
	opts Options
	c    clients
	crd  *apiextensionsv1.CustomResourceDefinition
	res  crdResult
}

func (k *checker) add(check, severity, fix, message string) {
	k.res.findings = append(k.res.findings, Finding{Check: check, Severity: severity, Message: message, Fix: fix})
}

// read tells Options.Read that n more objects were read.
func (k *checker) read(n int64) {
	if k.opts.Read != nil && n > 0 {
		k.opts.Read(n)
	}
}

// preflightRead is a preflight.Options.Progress that tells Options.Read what the preflight
// read since its last call.
func (k *checker) preflightRead() func(done, total int64) {
	var last int64
	return func(done, _ int64) {
		k.read(done - last)
		last = done
	}
}

func (k *checker) incomplete(check string, err error) {
	k.res.incomplete = append(k.res.incomplete, Incomplete{CRD: k.crd.Name, Check: check, Error: err.Error()})
}

func checkCRD(ctx context.Context, opts Options, c clients, crd *apiextensionsv1.CustomResourceDefinition, preferred string) crdResult {
	k := &checker{ctx: ctx, opts: opts, c: c, crd: crd, res: crdResult{objects: -1}}
	k.checkSchema()
	census := k.checkStorage()
	k.checkNoneReads()
	k.checkVersions(census, preferred)
	k.checkWebhook()
	return k.res
}

var severityRank = map[string]int{SeverityError: 0, SeverityWarning: 1, SeverityInfo: 2}

// sortFindings puts errors first, then warnings, then infos, keeping the checks' order.
func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool { return severityRank[fs[i].Severity] < severityRank[fs[j].Severity] })
}

// Failed reports whether the report fails a gate at the given severity (error or warning).
func (r *Report) Failed(failOn string) bool {
	if r.Summary.Errors > 0 {
		return true
	}
	return failOn == SeverityWarning && r.Summary.Warnings > 0
}

// sharedWebhooks notes, on each CRD whose webhook also converts other CRDs, the whole of what
// breaks when that webhook is down.
func sharedWebhooks(crds []*apiextensionsv1.CustomResourceDefinition, results []crdResult) {
	by := map[string][]int{}
	for i, res := range results {
		if res.webhook != "" {
			by[res.webhook] = append(by[res.webhook], i)
		}
	}
	for hook, idx := range by {
		if len(idx) < 2 {
			continue
		}
		var names []string
		var total int64
		known := true
		for _, i := range idx {
			names = append(names, crds[i].Name)
			if results[i].objects < 0 {
				known = false
			}
			total += results[i].objects
		}
		sort.Strings(names)
		count := fmt.Sprintf("%d objects", total)
		if !known {
			count = "an unknown number of objects"
		}
		for _, i := range idx {
			results[i].findings = append(results[i].findings, Finding{Check: CheckWebhook, Severity: SeverityInfo,
				Message: fmt.Sprintf("%s converts %d CRDs (%s): if it is down, %s of all of them are affected", hook, len(idx), strings.Join(names, ", "), count)})
		}
	}
}
