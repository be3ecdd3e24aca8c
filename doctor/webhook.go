package doctor

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// ExpiryWarning is how long before a certificate expires it is reported.
const ExpiryWarning = webhookcheck.ExpiryWarning

// checkWebhook runs the conversion webhook checks of a CRD whose strategy is Webhook: the
// configuration and reachability checks of package webhookcheck (the ones plan makes of a
// release's webhook), the reads through the API server, and a live round trip.
func (k *checker) checkWebhook() {
	crd := k.crd
	if !webhookcheck.IsWebhook(crd) {
		return
	}
	e, err := webhookcheck.EndpointOf(crd)
	if err != nil {
		k.add(CheckWebhook, SeverityError, "kubectl edit crd "+crd.Name, err.Error())
		return
	}
	k.res.webhook = e.Describe
	k.problems(e.ReviewVersionProblems())
	pool, ps := e.CABundle(crd.Spec.Conversion.Webhook.ClientConfig.CABundle, k.opts.Now())
	k.problems(ps)

	var st *webhookcheck.ServiceState
	reachable := false
	switch {
	case e.URL != nil:
		ok, ps := e.Handshake(k.ctx, pool, k.opts.Now(), k.opts.WebhookTimeout)
		reachable = ok
		k.problems(ps)
	case k.c.core != nil:
		st, ps, err = e.ServiceCheck(k.ctx, k.c.core)
		if err != nil {
			k.incomplete(CheckWebhook, err)
			break
		}
		k.problems(ps)
		reachable = st.Answering()
		if reachable && st.ExternalName == "" {
			k.add(CheckWebhook, SeverityInfo, "", fmt.Sprintf("serving certificate of %s not checked: it is reached only inside the cluster (kubectl crdver convert %s --webhook-address checks it after a port-forward)", e.Describe, crd.Name))
		}
	}
	readsOK := k.checkReads()
	if reachable && readsOK && !k.opts.SkipRoundTrip {
		k.roundTrips(st)
	}
	k.add(CheckWebhook, SeverityInfo, "", k.impact(e))
}

// problems adds webhookcheck's problems as findings of the webhook check.
func (k *checker) problems(ps []webhookcheck.Problem) {
	for _, p := range ps {
		k.add(CheckWebhook, p.Severity, p.Fix, p.Message)
	}
}

// impact says what breaks while the webhook is down.
func (k *checker) impact(e *webhookcheck.Endpoint) string {
	crd := k.crd
	storage := crdinfo.StorageVersion(crd)
	var others []string
	for _, v := range crdinfo.VersionNames(crd) {
		if ver, _ := crdinfo.Lookup(crd, v); ver != nil && ver.Served && v != storage {
			others = append(others, v)
		}
	}
	count := "an unknown number of objects"
	if k.res.objects >= 0 {
		count = fmt.Sprintf("%d objects", k.res.objects)
	}
	what := fmt.Sprintf("if %s is down: reads and writes of %s at %s fail (%s)", e.Describe, crd.Name, strings.Join(others, ", "), count)
	if len(others) == 0 {
		what = fmt.Sprintf("if %s is down: reads of %s objects stored at other versions fail (%s)", e.Describe, crd.Name, count)
	}
	if crdinfo.MigrationPending(crd) {
		what += ", and objects stored at old versions cannot be read at all"
	}
	return what
}

// checkReads lists one object at every served version through the API server, which converts
// through the webhook: a failure here is what users and controllers see. A read that fails at
// the preferred version also stalls what lists every kind there: the garbage collector and
// the deletion of namespaces.
func (k *checker) checkReads() bool {
	if k.c.dyn == nil {
		return false
	}
	ok := true
	preferred := crdinfo.PreferredVersion(k.crd)
	for _, v := range crdinfo.VersionNames(k.crd) {
		ver, _ := crdinfo.Lookup(k.crd, v)
		if ver == nil || !ver.Served {
			continue
		}
		_, err := k.c.dyn.Resource(crdinfo.GVR(k.crd, v)).List(k.ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			if apierrors.IsForbidden(err) || k.ctx.Err() != nil {
				k.incomplete(CheckWebhook, fmt.Errorf("reading %s at %s: %w", k.crd.Name, v, err))
				return false
			}
			msg := fmt.Sprintf("reading %s at %s through the API server fails: %s", k.crd.Name, v, conversionCause(err.Error()))
			if v == preferred {
				msg += fmt.Sprintf("; %s is the preferred version, which kubectl get %s, the garbage collector and the namespace controller read: the garbage collector cannot collect %s objects (nor what they own), and deleting a namespace that holds one stays Terminating",
					v, k.crd.Spec.Names.Plural, k.crd.Spec.Names.Kind)
			}
			k.add(CheckWebhook, SeverityError, "kubectl crdver convert "+k.crd.Name+" --to "+v+" --from-cluster", msg)
			ok = false
		}
	}
	return ok
}

// roundTrips converts one live object per served version pair A -> B -> A through the
// webhook, with webhookcheck's round trip (convert's checks).
func (k *checker) roundTrips(st *webhookcheck.ServiceState) {
	var served []string
	for _, v := range crdinfo.VersionNames(k.crd) {
		if ver, _ := crdinfo.Lookup(k.crd, v); ver != nil && ver.Served {
			served = append(served, v)
		}
	}
	if len(served) < 2 {
		return
	}
	objects := map[string]map[string]any{}
	for _, v := range served {
		list, err := k.c.dyn.Resource(crdinfo.GVR(k.crd, v)).List(k.ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return // reported by checkReads
		}
		if len(list.Items) == 0 {
			k.add(CheckWebhook, SeverityInfo, "kubectl crdver convert "+k.crd.Name+" --to "+served[0]+" --generate 50 --round-trip",
				"no objects: no live round trip through the webhook was made")
			return
		}
		objects[v] = list.Items[0].Object
	}
	for i, a := range served {
		for _, b := range served[i+1:] {
			k.roundTrip(st, a, b, objects[a])
		}
	}
}

func (k *checker) roundTrip(st *webhookcheck.ServiceState, from, to string, obj map[string]any) {
	name := objectName(obj)
	fix := fmt.Sprintf("kubectl crdver convert %s --to %s --from-cluster --round-trip", k.crd.Name, to)
	what := fmt.Sprintf("round trip %s -> %s -> %s of %s", from, to, from, name)
	reach := webhookcheck.Reach{Timeout: k.opts.WebhookTimeout}
	if k.c.core != nil {
		reach.Proxy = k.c.core.CoreV1().RESTClient()
	}
	res, err := roundTripOne(k.ctx, k.crd, st, reach, from, to, name, obj)
	if err != nil {
		k.incomplete(CheckWebhook, fmt.Errorf("%s: %w", what, err))
		return
	}
	if res.Unreachable != "" {
		k.add(CheckWebhook, SeverityError, fix, fmt.Sprintf("%s: webhook unreachable: %s", what, res.Unreachable))
		return
	}
	for _, f := range res.findings {
		k.add(CheckWebhook, f.severity, fix, what+": "+f.text)
	}
	if len(res.findings) == 0 {
		k.add(CheckWebhook, SeverityInfo, "", fmt.Sprintf("%s passed every check (%d requests, slowest %.0f ms)", what, res.Requests, res.SlowestMs))
	}
}

func objectName(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if ns, _ := meta["namespace"].(string); ns != "" {
		return ns + "/" + name
	}
	return name
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// conversionCause shortens the API server's storage error to the conversion failure it wraps.
func conversionCause(msg string) string {
	msg = firstLine(msg)
	if i := strings.Index(msg, "conversion webhook for "); i >= 0 {
		return msg[i:]
	}
	return msg
}
