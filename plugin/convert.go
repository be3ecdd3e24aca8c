package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/printers"
)

const convertExample = `  # Convert the objects of a file to v1 through the live webhook, and back, checking everything
  kubectl crdver convert crontabs.stable.example.com --to v1 -f testdata/convert/crontabs-v1beta1.yaml --round-trip

  # A service-referenced webhook, after kubectl port-forward -n crontab svc/crontab-conversion 9443:443;
  # TLS is still verified against the CRD's caBundle as crontab-conversion.crontab.svc
  kubectl crdver convert crontabs.stable.example.com --to v1 --from-cluster -A --webhook-address 127.0.0.1:9443

  # Fuzz the webhook with 500 objects synthesised from the v1beta1 schema; keep the failing ones
  # (crontab-crd.yaml: the CRD, with the url and caBundle of a webhook you run, e.g. the test
  # webhook: go run ./internal/testwebhook/cmd/crontab-webhook &, which writes crontab-crd.yaml)
  kubectl crdver convert --crd-file crontab-crd.yaml --to v1 --generate 500 --seed 7 --from v1beta1 --round-trip --keep failing.yaml

  # Rewrite the manifests of a repository in place: every HTTPRoute below v1 becomes v1 (comments and
  # other documents kept); a file is written only when each of its objects is proven lossless
  kubectl crdver convert --crd-file crds/httproutes.yaml --to v1 -f deploy/ --write

  # The same, printing a unified diff per file and writing nothing
  kubectl crdver convert --crd-file crds/httproutes.yaml --to v1 -f deploy/ --write --dry-run

  # A release's CRDs in one run (no CRD named): every object of each CRD in the files, to v1, each
  # judged on the API server's create path as Kubernetes 1.34 before its file is written
  kubectl crdver convert --crd-file strimzi-0.51.0/ --to v1 -f deploy/ --write --kube-version 1.34

  # CI gate: exit 1 and list every HTTPRoute still below v1
  kubectl crdver convert --crd-file crds/httproutes.yaml --to v1 -f deploy/ --check -o markdown

  # Does the webhook meet the API server's budget? Requests of 1, 1,500 and 10,000 live objects,
  # p50 and p99 per size against the CRD GA scale targets (50 ms, 1 s, 6 s); exit 1 when over
  kubectl crdver convert crontabs.stable.example.com --to v1 --from-cluster -A --webhook-address 127.0.0.1:9443 --load

  # No network path to the webhook: let the API server call it (server-side dry runs, nothing is written)
  kubectl crdver convert crontabs.stable.example.com --to v1 --from-cluster -n prod --via-apiserver`

// ConvertOptions are the options of `kubectl crdver convert`.
type ConvertOptions struct {
	g       *Globals
	source  *crdSource
	out     *outputFlags
	printer ReportPrinter

	Name          string
	To            string
	Files         []string
	FromCluster   bool
	AllNamespaces bool
	Selector      string
	Limit         int64
	Generate      int
	Seed          uint64
	From          string
	RoundTrip     bool
	ReviewVersion string
	BatchSize     int
	Timeout       time.Duration
	Keep          string
	ViaAPIServer  bool
	progressFlags *progressFlags
	progress      Progress
	Strict        bool

	Write         bool
	DryRun        bool
	Check         bool
	AllowDataLoss bool

	Load         bool
	LoadSizes    []int
	LoadRequests int
	LoadDuration time.Duration
	kube         *kubeVersionFlag

	WebhookAddress  string
	ViaServiceProxy bool
	CAFile          string
	ClientCert      string
	ClientKey       string
	Insecure        bool
}

// NewCmdConvert builds `kubectl crdver convert`.
func NewCmdConvert(g *Globals) *cobra.Command {
	o := &ConvertOptions{g: g}
	cmd := &cobra.Command{
		Use:   "convert CRD | --crd-file FILE --to VERSION [-f OBJECTS | --from-cluster | --generate N]",
		Short: "Send real ConversionReviews to a CRD's conversion webhook and check every response like kube-apiserver",
		Long: `Convert custom resources through the CRD's live conversion webhook and check every response
the way kube-apiserver does: review kind and version, response uid, result status, object count
and order, apiVersion, kind, name, namespace and uid unchanged, metadata present, only labels
and annotations changed (and valid). The converted objects are then pruned and validated in
the target version's schema: whatever the API server would prune is data loss.

With --round-trip every object goes A -> V -> A and the result is compared with the original
by JSON path: each difference is a lossy conversion.

Objects come from files (-f), from the cluster (--from-cluster, read in --from), or are
synthesised from the source version's schema (--generate N --seed S --from V0).

The webhook is reached as the CRD says: its url, or its service through a local address
(--webhook-address, e.g. after kubectl port-forward) with TLS verified against the caBundle
and the service's DNS name, or through the API server's service proxy (--via-service-proxy,
which does not verify the caBundle). --via-apiserver lets the API server call the webhook
(server-side dry runs; nothing is written).

Checks the API server itself does not fail on (a Content-Type other than application/json,
changes to metadata it restores, a converted object its target schema would reject on a
write) are warnings: reported and counted, but they do not fail the run unless --strict.

Exit status: 0 no check failed (warnings allowed); 1 a check failed, a conversion is lossy,
or --strict and a warning; 2 usage error; 3 the webhook (or the cluster) could not be reached.`,
		Example:           convertExample,
		ValidArgsFunction: completeCRDNames(g),
		RunE:              runE(o),
	}
	o.source = addCRDFileFlag(cmd, g, "crd-file", "")
	o.out = addOutputFlags(cmd, outputJSON, outputYAML, outputMarkdown)
	f := cmd.Flags()
	f.StringVar(&o.To, "to", "", "Version to convert to (required; with --write and --check: default each CRD's storage version)")
	f.StringSliceVarP(&o.Files, "filename", "f", nil, "Objects to convert: files, directories, - for stdin (YAML or JSON, several documents, Lists)")
	f.BoolVar(&o.FromCluster, "from-cluster", false, "Convert the CRD's objects from the cluster (read in --from)")
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "With --from-cluster: objects of every namespace")
	f.StringVarP(&o.Selector, "selector", "l", "", "With --from-cluster: label selector")
	f.Int64Var(&o.Limit, "limit", 0, "With --from-cluster: at most this many objects (0: all)")
	f.IntVar(&o.Generate, "generate", 0, "Synthesise this many objects from the --from version's schema")
	f.Uint64Var(&o.Seed, "seed", 1, "With --generate: the seed; the same seed gives the same objects")
	f.StringVar(&o.From, "from", "", "Version to read (--from-cluster) or generate (--generate) objects in (default: the highest-priority served version other than --to)")
	f.BoolVar(&o.RoundTrip, "round-trip", false, "Convert back to each object's version and report every difference as a lossy conversion")
	f.StringVar(&o.ReviewVersion, "review-version", "", "ConversionReview version to send: v1 or v1beta1 (default: the first supported one in conversionReviewVersions, as the API server does)")
	f.IntVar(&o.BatchSize, "batch-size", convert.DefaultBatchSize, "Objects per ConversionReview (the API server converts a list page in one request)")
	f.DurationVar(&o.Timeout, "timeout", convert.DefaultTimeout, "Timeout per webhook request")
	f.StringVar(&o.Keep, "keep", "", "Write the objects that failed a check to this file (YAML), for a bug report")
	f.BoolVar(&o.ViaAPIServer, "via-apiserver", false, "Let the API server call the webhook: dry-run create of -f/--generate objects in their version (A -> storage -> A); for --from-cluster, read in every served version and dry-run update in each")
	f.StringVar(&o.WebhookAddress, "webhook-address", "", "HOST:PORT to connect to instead of the webhook's service (or url host); TLS is still verified as the clientConfig's name")
	f.BoolVar(&o.ViaServiceProxy, "via-service-proxy", false, "Reach a service-referenced webhook through the API server's service proxy (the caBundle is NOT verified on this path)")
	f.StringVar(&o.CAFile, "webhook-ca-file", "", "PEM CA to verify the webhook with, instead of the CRD's caBundle")
	f.StringVar(&o.ClientCert, "webhook-client-cert", "", "PEM client certificate for webhooks that demand one (with --webhook-client-key)")
	f.StringVar(&o.ClientKey, "webhook-client-key", "", "PEM key of --webhook-client-cert")
	f.BoolVar(&o.Insecure, "webhook-insecure-skip-tls-verify", false, "Do not verify the webhook's certificate (never the default)")
	o.progressFlags = addProgressFlagsEvery(cmd, time.Second)
	f.BoolVar(&o.Strict, "strict", false, "Warnings (what the API server would not fail on, such as a text/plain Content-Type) fail the run too (exit 1)")
	f.BoolVar(&o.Write, "write", false, "With -f: rewrite the files in place, each once all its objects convert, round-trip and are accepted by the API server's create path at --to (comments and other documents kept); with no CRD named, the objects of every CRD of --crd-file (a release) or of the cluster")
	f.BoolVar(&o.DryRun, "dry-run", false, "With --write: print a unified diff per file and write nothing")
	f.BoolVar(&o.Check, "check", false, "With -f: convert nothing; list every object still at a version other than --to, or its CRD's storage version (exit 1 when there is one); with no CRD named, of every CRD of --crd-file or of the cluster")
	f.BoolVar(&o.AllowDataLoss, "allow-data-loss", false, "With --write: write conversions that drop fields (pruned, or lost on the round trip), listing what was dropped")
	f.BoolVar(&o.Load, "load", false, "Time ConversionReviews of the sizes the API server sends (1 object, a namespace's list of 1,500, the cluster's list of 10,000), filled with the objects given, and judge p99 against the CRD GA scale budget (50 ms, 1 s, 6 s): exit 1 when over")
	f.IntSliceVar(&o.LoadSizes, "load-sizes", []int{1, 1500, 10000}, "With --load: the request sizes to time, among 1, 1500 and 10000")
	f.IntVar(&o.LoadRequests, "load-requests", convert.DefaultLoadRequests, "With --load: timed requests per size (after one untimed request whose answer is checked in full)")
	f.DurationVar(&o.LoadDuration, "load-duration", convert.DefaultLoadDuration, "With --load: the most time spent on one size (at least 3 requests are timed)")
	o.kube = addKubeVersionFlag(cmd)
	o.source.kube = o.kube
	registerVersionCompletion(cmd, o.source, "to", "from")
	_ = cmd.RegisterFlagCompletionFunc("review-version", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"v1", "v1beta1"}, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// Complete takes the arguments.
func (o *ConvertOptions) Complete(_ *cobra.Command, args []string) error {
	if len(args) > 1 {
		return UsageErrorf("convert takes one CRD name, got %d (%s)", len(args), strings.Join(args, " "))
	}
	if len(args) == 1 {
		o.Name = args[0]
	}
	o.progress = o.progressFlags.toProgress(o.g.ErrOut)
	var err error
	o.printer, err = o.out.toPrinter(humanOptions{})
	return err
}

// Validate checks that the flags fit together. It does no I/O.
func (o *ConvertOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	if err := o.progressFlags.validate(); err != nil {
		return err
	}
	if err := stdinOnce(o.Files, o.source); err != nil {
		return err
	}
	if err := o.kube.validate(); err != nil {
		return err
	}
	if err := o.validateLoad(); err != nil {
		return err
	}
	sources := 0
	for _, b := range []bool{len(o.Files) > 0, o.FromCluster, o.Generate > 0} {
		if b {
			sources++
		}
	}
	switch {
	case o.To == "" && !o.Write && !o.Check:
		return UsageErrorf("--to is required: the version to convert to")
	case o.kube.value != "" && !o.Write:
		return UsageErrorf("--kube-version goes with --write: the version whose API server judges the converted objects")
	case o.Write && o.Check:
		return UsageErrorf("--write rewrites the files and --check only lists what is left to convert: choose one")
	case (o.Write || o.Check) && len(o.Files) == 0:
		return UsageErrorf("--write and --check work on files: give them with -f PATH")
	case (o.Write || o.Check) && stdinIn(o.Files):
		return UsageErrorf("--write and --check work on files: -f - (standard input) cannot be rewritten")
	case (o.Write || o.Check) && (o.ViaAPIServer || o.Keep != ""):
		return UsageErrorf("--via-apiserver and --keep do not apply to --write and --check")
	case o.DryRun && !o.Write:
		return UsageErrorf("--dry-run goes with --write: it prints the diff --write would make")
	case o.AllowDataLoss && !o.Write:
		return UsageErrorf("--allow-data-loss goes with --write")
	case o.out.format == outputMarkdown && !o.Write && !o.Check && !o.Load:
		return UsageErrorf("-o markdown is for --write, --check and --load reports")
	case o.Name == "" && !o.source.offline() && !o.Write && !o.Check:
		return UsageErrorf("name a CRD (e.g. crontabs.stable.example.com), or read one with --crd-file")
	case sources != 1:
		return UsageErrorf("give exactly one source of objects: -f FILE, --from-cluster or --generate N")
	case o.Generate < 0:
		return UsageErrorf("--generate %d: want a positive number of objects", o.Generate)
	case !o.FromCluster && (o.AllNamespaces || o.Selector != "" || o.Limit != 0):
		return UsageErrorf("-A, -l and --limit select objects in the cluster: they need --from-cluster")
	case o.Limit < 0:
		return UsageErrorf("--limit %d: want 0 (all) or more", o.Limit)
	case o.From != "" && len(o.Files) > 0:
		return UsageErrorf("--from is for --from-cluster and --generate: objects from files keep their own apiVersion")
	case o.ReviewVersion != "" && o.ReviewVersion != "v1" && o.ReviewVersion != "v1beta1":
		return UsageErrorf("--review-version %q: use v1 or v1beta1", o.ReviewVersion)
	case o.BatchSize < 1:
		return UsageErrorf("--batch-size %d: want at least 1", o.BatchSize)
	case o.Timeout <= 0:
		return UsageErrorf("--timeout %s: want a positive duration, e.g. 10s", o.Timeout)
	case o.ViaServiceProxy && o.WebhookAddress != "":
		return UsageErrorf("--via-service-proxy and --webhook-address are two ways to reach the webhook: choose one")
	case o.ViaAPIServer && (o.ViaServiceProxy || o.WebhookAddress != "" || o.CAFile != "" || o.ClientCert != "" || o.Insecure):
		return UsageErrorf("--via-apiserver lets the API server call the webhook: the webhook connection flags do not apply")
	case (o.ClientCert == "") != (o.ClientKey == ""):
		return UsageErrorf("--webhook-client-cert and --webhook-client-key go together")
	case o.Insecure && o.CAFile != "":
		return UsageErrorf("--webhook-insecure-skip-tls-verify and --webhook-ca-file contradict each other: choose one")
	}
	return nil
}

// crdAndVersions reads the one CRD and checks --to and --from against it (--from defaults to
// the version the conversion starts from).
func (o *ConvertOptions) crdAndVersions(ctx context.Context) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := o.source.one(ctx, o.Name)
	if err != nil {
		return nil, err
	}
	if _, err := crdinfo.Lookup(crd, o.To); err != nil {
		return nil, Usage(err)
	}
	if o.From != "" {
		if _, err := crdinfo.Lookup(crd, o.From); err != nil {
			return nil, Usage(err)
		}
	} else {
		o.From = crdinfo.DefaultSource(crd, o.To)
	}
	return crd, nil
}

// Run converts and prints the report as the objects come: the findings of each page as soon
// as it is done, the counts and checks at the end.
func (o *ConvertOptions) Run(ctx context.Context) error {
	if o.Write || o.Check {
		return o.runWrite(ctx)
	}
	if o.Load {
		return o.runLoad(ctx)
	}
	crd, err := o.crdAndVersions(ctx)
	if err != nil {
		return err
	}
	out := printers.NewConvertStream(o.g.Out, o.printer)
	keep := &keepFile{path: o.Keep}
	defer keep.close()
	report, runErr := o.convert(ctx, crd, func(p convert.PageResult) error {
		if err := keep.add(p.Keep); err != nil {
			return err
		}
		return out.Page(p)
	})
	if report == nil {
		return runErr
	}
	if err := keep.finish(report); err != nil {
		return err
	}
	if err := out.Finish(report); err != nil {
		return err
	}
	// Interrupted (runErr: the report above is what was done), or as the report says.
	if runErr == nil {
		runErr = webhookUnreachable(crd.Name, report.Unreachable, report.UnreachableError)
	}
	return end(report.Ended(ctx, o.Strict), runErr)
}

// convert converts the objects as the flags say: through the API server (--via-apiserver:
// the live objects, or dry runs of the given ones), else through the webhook or the API
// server's rule for None, giving page each page's results. The report's notes say where the
// objects came from. When interrupted, the report of the pages done comes with the error.
func (o *ConvertOptions) convert(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, page func(convert.PageResult) error) (*convert.Report, error) {
	if o.ViaAPIServer && o.FromCluster {
		dyn, ns, err := o.dynamic()
		if err != nil {
			return nil, err
		}
		report, err := convert.LiveRoundTrip(ctx, convert.ViaAPIServerOptions{CRD: crd, Client: dyn, Namespace: ns, To: o.To}, o.selection(ns))
		if err = o.viaAPIServerError(ctx, err); err != nil {
			return nil, err
		}
		return report, nil
	}
	src, err := o.objects(ctx, crd)
	if err != nil {
		return nil, err
	}
	defer src.close()
	var report *convert.Report
	if o.ViaAPIServer {
		report, err = o.dryRuns(ctx, crd, src, page)
	} else {
		report, err = o.runSource(ctx, crd, src, page)
	}
	if report == nil {
		return nil, err
	}
	if report.Objects == 0 && ctx.Err() == nil {
		if err := src.none(); err != nil {
			return nil, err
		}
	}
	report.Notes = append(src.notes(report), report.Notes...)
	if ctx.Err() != nil {
		return report, fmt.Errorf("interrupted after %s (the report above covers them): nothing was written", plural(report.Objects, "object")) // the exit code: report.Ended's
	}
	return report, nil
}

// dryRuns is --via-apiserver with objects of the input: dry-run creates, a page at a time.
func (o *ConvertOptions) dryRuns(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, src convert.Source, page func(convert.PageResult) error) (*convert.Report, error) {
	dyn, ns, err := o.dynamic()
	if err != nil {
		return nil, err
	}
	report, err := convert.DryRunRoundTripSource(ctx, convert.ViaAPIServerOptions{CRD: crd, Client: dyn, Namespace: ns, To: o.To, Page: page}, src)
	if ctx.Err() != nil && report != nil {
		return report, ctx.Err()
	}
	if ierr := inputError(err); ierr != err {
		return nil, ierr
	}
	if err = o.viaAPIServerError(ctx, err); err != nil {
		return nil, err
	}
	return report, nil
}

func (o *ConvertOptions) viaAPIServerError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return Unavailable(fmt.Errorf("interrupted: nothing was written"))
	}
	if err != nil {
		return clusterError("round trip through the API server", err)
	}
	return nil
}

// runSource converts src's objects, a page at a time, through the webhook or the API
// server's rule for None, with a progress display. When interrupted, the report of the pages
// done comes with ctx's error.
func (o *ConvertOptions) runSource(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, src convert.Source, page func(convert.PageResult) error) (*convert.Report, error) {
	opts := convert.Options{CRD: crd, To: o.To, ReviewVersion: o.ReviewVersion, BatchSize: o.BatchSize, RoundTrip: o.RoundTrip, MaxAdded: maxAddedListed, Page: page}
	if convert.Strategy(crd) == string(apiextensionsv1.WebhookConverter) {
		var err error
		if opts.Transport, err = o.transport(crd); err != nil {
			return nil, err
		}
	}
	var done, total atomic.Int64
	total.Store(-1) // not known until the source says
	opts.Progress = func(d, t int) {
		done.Store(int64(d))
		if t > 0 {
			total.Store(int64(t))
		}
	}
	stop := o.progress.Start(Task{Name: "converting", Prefix: "convert", Unit: "objects", Verb: "converted", Done: done.Load, TotalFunc: total.Load})
	report, err := convert.RunSource(ctx, opts, src)
	stop()
	if ctx.Err() != nil && report != nil {
		return report, ctx.Err()
	}
	var listErr *convert.ListError
	var ee *ExitError
	switch {
	case err == nil:
		return report, nil
	case errors.As(err, &listErr):
		return nil, clusterError(fmt.Sprintf("listing %s at %s", listErr.CRD, listErr.Version), listErr.Err)
	case errors.As(err, &ee):
		return nil, err
	}
	if ierr := inputError(err); ierr != err {
		return nil, ierr // the input's: exit 2 (malformed) or 3 (a URL that does not answer)
	}
	return nil, Usage(err)
}

// maxAddedListed bounds what a run lists of what its round trips added or normalised (the
// objects are counted all the same): memory stays bounded whatever the number of objects.
const maxAddedListed = 1000

func (o *ConvertOptions) clusterNote(cs *convert.ClusterSource) string {
	if cs.Read() == 0 {
		return fmt.Sprintf("0 object(s) read from the cluster at %s: nothing to convert", o.From)
	}
	return fmt.Sprintf("%d object(s) read from the cluster at %s, in pages of at most %d", cs.Read(), o.From, convert.DefaultPageSize)
}

func (o *ConvertOptions) dynamic() (dynamic.Interface, string, error) {
	cs, err := o.g.clients()
	if err != nil {
		return nil, "", err
	}
	dyn, err := cs.Dynamic()
	if err != nil {
		return nil, "", err
	}
	ns, err := o.g.Namespace()
	if err != nil {
		return nil, "", err
	}
	return dyn, ns, nil
}

// selection is which live objects --from-cluster reads: -n/-A, -l and --limit, in pages.
func (o *ConvertOptions) selection(ns string) convert.Selection {
	return convert.Selection{Namespace: ns, AllNamespaces: o.AllNamespaces, LabelSelector: o.Selector, Limit: o.Limit}
}

func (o *ConvertOptions) namespaceOrDefault() (string, error) {
	ns, err := o.g.Namespace()
	if err != nil || ns != "" {
		return ns, err
	}
	return "default", nil
}
