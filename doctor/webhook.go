package doctor

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// ExpiryWarning is how long before a certificate expires it is reported.
const ExpiryWarning = 30 * 24 * time.Hour

// webhookTarget is where a conversion webhook is.
type webhookTarget struct {
	cc *apiextensionsv1.WebhookClientConfig
	// url is set for url-style webhooks.
	url *url.URL
	// host and port to reach (for a service, <svc>.<ns>.svc and the service port).
	host string
	port int
	// name is the DNS name (or IP) the serving certificate must carry.
	name string
	// describe names the webhook in messages.
	describe string
}

func targetOf(cc *apiextensionsv1.WebhookClientConfig) (*webhookTarget, error) {
	t := &webhookTarget{cc: cc}
	switch {
	case cc.URL != nil:
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return nil, fmt.Errorf("clientConfig.url %q does not parse: %w", *cc.URL, err)
		}
		if u.Scheme != "https" {
			return nil, fmt.Errorf("clientConfig.url %q is not https", *cc.URL)
		}
		t.url, t.host, t.name = u, u.Hostname(), u.Hostname()
		t.port = 443
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil, fmt.Errorf("clientConfig.url %q: bad port", *cc.URL)
			}
			t.port = n
		}
		t.describe = "url " + u.String()
	case cc.Service != nil:
		s := cc.Service
		t.port = 443
		if s.Port != nil {
			t.port = int(*s.Port)
		}
		t.host = s.Name + "." + s.Namespace + ".svc"
		t.name = t.host
		path := ""
		if s.Path != nil {
			path = *s.Path
		}
		t.describe = fmt.Sprintf("service %s/%s:%d%s", s.Namespace, s.Name, t.port, path)
	default:
		return nil, errors.New("clientConfig has neither url nor service")
	}
	return t, nil
}

// checkWebhook runs the conversion webhook checks of a CRD whose strategy is Webhook.
func (k *checker) checkWebhook() {
	crd := k.crd
	c := crd.Spec.Conversion
	if c == nil || c.Strategy != apiextensionsv1.WebhookConverter {
		return
	}
	editFix := "kubectl edit crd " + crd.Name
	if c.Webhook == nil || c.Webhook.ClientConfig == nil {
		k.add(CheckWebhook, SeverityError, editFix, "strategy Webhook without spec.conversion.webhook.clientConfig: every conversion fails")
		return
	}
	supported := false
	for _, v := range c.Webhook.ConversionReviewVersions {
		if v == "v1" || v == "v1beta1" {
			supported = true
			break
		}
	}
	if !supported {
		k.add(CheckWebhook, SeverityError, editFix,
			fmt.Sprintf("conversionReviewVersions %v holds neither v1 nor v1beta1: the API server cannot call this webhook", c.Webhook.ConversionReviewVersions))
	}
	t, err := targetOf(c.Webhook.ClientConfig)
	if err != nil {
		k.add(CheckWebhook, SeverityError, editFix, err.Error())
		return
	}
	k.res.webhook = t.describe
	pool := k.checkCABundle(c.Webhook.ClientConfig.CABundle)

	reachable := false
	switch {
	case t.url != nil:
		reachable = k.checkURL(t, pool)
	default:
		reachable = k.checkService(t)
	}
	readsOK := k.checkReads()
	if reachable && readsOK && !k.opts.SkipRoundTrip {
		k.roundTrips(t)
	}
	k.add(CheckWebhook, SeverityInfo, "", k.impact(t))
}

// impact says what breaks while the webhook is down.
func (k *checker) impact(t *webhookTarget) string {
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
	what := fmt.Sprintf("if %s is down: reads and writes of %s at %s fail (%s)", t.describe, crd.Name, strings.Join(others, ", "), count)
	if len(others) == 0 {
		what = fmt.Sprintf("if %s is down: reads of %s objects stored at other versions fail (%s)", t.describe, crd.Name, count)
	}
	if crdinfo.MigrationPending(crd) {
		what += ", and objects stored at old versions cannot be read at all"
	}
	return what
}

// checkCABundle parses the caBundle and reports certificates that expired or expire soon. It
// returns the pool (nil when there is no usable caBundle).
func (k *checker) checkCABundle(bundle []byte) *x509.CertPool {
	fix := "renew the CA and update spec.conversion.webhook.clientConfig.caBundle (kubectl edit crd " + k.crd.Name + ")"
	if len(bytes.TrimSpace(bundle)) == 0 {
		k.add(CheckWebhook, SeverityInfo, "", "no caBundle: the API server verifies the webhook against its own system roots")
		return nil
	}
	pool := x509.NewCertPool()
	rest := bundle
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			k.add(CheckWebhook, SeverityError, fix, fmt.Sprintf("caBundle certificate %d does not parse: %v", n+1, err))
			continue
		}
		n++
		pool.AddCert(cert)
		k.checkExpiry("caBundle certificate "+strconv.Quote(cert.Subject.CommonName), cert, fix)
	}
	if n == 0 {
		k.add(CheckWebhook, SeverityError, fix, "caBundle holds no PEM certificate: the API server cannot verify the webhook and every conversion fails")
		return nil
	}
	return pool
}

func (k *checker) checkExpiry(what string, cert *x509.Certificate, fix string) {
	now := k.opts.Now()
	switch {
	case now.After(cert.NotAfter):
		k.add(CheckWebhook, SeverityError, fix, fmt.Sprintf("%s expired at %s", what, cert.NotAfter.UTC().Format(time.RFC3339)))
	case now.Before(cert.NotBefore):
		k.add(CheckWebhook, SeverityError, fix, fmt.Sprintf("%s is not valid before %s", what, cert.NotBefore.UTC().Format(time.RFC3339)))
	case cert.NotAfter.Sub(now) < ExpiryWarning:
		k.add(CheckWebhook, SeverityWarning, fix, fmt.Sprintf("%s expires in %s (%s)", what, humanDuration(cert.NotAfter.Sub(now)), cert.NotAfter.UTC().Format(time.RFC3339)))
	}
}

// checkURL checks a url-style webhook: that its host resolves (IP literals need nothing) and,
// by a TLS handshake (no request is sent), that its serving certificate chains to the
// caBundle, names the host and is in date. It returns whether the handshake succeeded.
func (k *checker) checkURL(t *webhookTarget, pool *x509.CertPool) bool {
	ctx, cancel := context.WithTimeout(k.ctx, k.opts.WebhookTimeout)
	defer cancel()
	fix := "check that the webhook is running and listening at " + t.url.String()
	d := &net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(t.host, strconv.Itoa(t.port)))
	if err != nil {
		k.add(CheckWebhook, SeverityError, fix, fmt.Sprintf("webhook is down: %s: %v", t.describe, unwrapOp(err)))
		return false
	}
	defer conn.Close()
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // the chain is verified below, against the caBundle
	if net.ParseIP(t.host) == nil {
		cfg.ServerName = t.host
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		k.add(CheckWebhook, SeverityError, fix, fmt.Sprintf("TLS handshake with %s failed: %v", t.describe, unwrapOp(err)))
		return false
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		k.add(CheckWebhook, SeverityError, fix, fmt.Sprintf("%s sent no serving certificate", t.describe))
		return false
	}
	k.checkServingCert(t, certs, pool)
	return true
}

// checkServingCert: the chain to the caBundle, the name, the expiry.
func (k *checker) checkServingCert(t *webhookTarget, certs []*x509.Certificate, pool *x509.CertPool) {
	leaf := certs[0]
	fix := "reissue the webhook's serving certificate and update the caBundle together (kubectl edit crd " + k.crd.Name + ")"
	k.checkExpiry("serving certificate of "+t.describe, leaf, fix)
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: k.opts.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if pool != nil {
		if _, err := leaf.Verify(opts); err != nil {
			var inv x509.CertificateInvalidError
			if !(errors.As(err, &inv) && inv.Reason == x509.Expired) {
				k.add(CheckWebhook, SeverityError, fix, fmt.Sprintf("serving certificate of %s does not chain to the caBundle: %v", t.describe, err))
			}
		}
	}
	if err := leaf.VerifyHostname(t.name); err != nil {
		names := append(append([]string{}, leaf.DNSNames...), ipStrings(leaf.IPAddresses)...)
		k.add(CheckWebhook, SeverityError, fix, fmt.Sprintf("serving certificate of %s does not name %s (it names %s)", t.describe, t.name, strings.Join(names, ", ")))
	}
}

func ipStrings(ips []net.IP) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// checkService checks a service-style webhook: the Service exists and has the port, and its
// EndpointSlices hold a ready endpoint. The serving certificate is not fetched (that needs a
// network path into the cluster).
func (k *checker) checkService(t *webhookTarget) bool {
	s := t.cc.Service
	if k.c.core == nil {
		return false
	}
	fix := fmt.Sprintf("kubectl -n %s get service,endpointslices -l kubernetes.io/service-name=%s", s.Namespace, s.Name)
	svc, err := k.c.core.CoreV1().Services(s.Namespace).Get(k.ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		k.add(CheckWebhook, SeverityError, fmt.Sprintf("deploy the webhook's Service %s/%s, or fix spec.conversion.webhook.clientConfig.service", s.Namespace, s.Name),
			fmt.Sprintf("webhook is down: Service %s/%s does not exist", s.Namespace, s.Name))
		return false
	}
	if err != nil {
		k.incomplete(CheckWebhook, fmt.Errorf("reading Service %s/%s: %w", s.Namespace, s.Name, err))
		return false
	}
	hasPort := false
	for _, p := range svc.Spec.Ports {
		if int(p.Port) == t.port {
			hasPort = true
		}
	}
	if !hasPort && svc.Spec.Type != "ExternalName" {
		k.add(CheckWebhook, SeverityError, fix, fmt.Sprintf("webhook is down: Service %s/%s has no port %d", s.Namespace, s.Name, t.port))
		return false
	}
	slices, err := k.c.core.DiscoveryV1().EndpointSlices(s.Namespace).List(k.ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + s.Name})
	if err != nil {
		k.incomplete(CheckWebhook, fmt.Errorf("listing EndpointSlices of Service %s/%s: %w", s.Namespace, s.Name, err))
		return false
	}
	ready := 0
	for _, sl := range slices.Items {
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ready += len(e.Addresses)
			}
		}
	}
	if ready == 0 && svc.Spec.Type != "ExternalName" {
		k.add(CheckWebhook, SeverityError, fix, fmt.Sprintf("webhook is down: Service %s/%s has no ready endpoints", s.Namespace, s.Name))
		return false
	}
	k.add(CheckWebhook, SeverityInfo, "", fmt.Sprintf("serving certificate of %s not checked: it is reached only inside the cluster (kubectl crdver convert %s --webhook-address checks it after a port-forward)", t.describe, k.crd.Name))
	return true
}

// checkReads lists one object at every served version through the API server, which converts
// through the webhook: a failure here is what users and controllers see.
func (k *checker) checkReads() bool {
	if k.c.dyn == nil {
		return false
	}
	ok := true
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
			k.add(CheckWebhook, SeverityError, "kubectl crdver convert "+k.crd.Name+" --to "+v+" --from-cluster",
				fmt.Sprintf("reading %s at %s through the API server fails: %s", k.crd.Name, v, conversionCause(err.Error())))
			ok = false
		}
	}
	return ok
}

// roundTrips converts one live object per served version pair A -> B -> A through the
// webhook, with convert's checks.
func (k *checker) roundTrips(t *webhookTarget) {
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
			k.roundTrip(t, a, b, objects[a])
		}
	}
}

func (k *checker) roundTrip(t *webhookTarget, from, to string, obj map[string]any) {
	u := unstructured.Unstructured{Object: obj}
	name := u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	fix := fmt.Sprintf("kubectl crdver convert %s --to %s --from-cluster --round-trip", k.crd.Name, to)
	res, err := roundTripOne(k.ctx, k, t, from, to, name, obj)
	if err != nil {
		k.incomplete(CheckWebhook, fmt.Errorf("round trip %s -> %s -> %s of %s: %w", from, to, from, name, err))
		return
	}
	if res.unreachable != "" {
		k.add(CheckWebhook, SeverityError, fix, fmt.Sprintf("round trip %s -> %s -> %s of %s: webhook unreachable: %s", from, to, from, name, res.unreachable))
		return
	}
	for _, f := range res.findings {
		sev := SeverityError
		if f.severity == "warning" {
			sev = SeverityWarning
		}
		k.add(CheckWebhook, sev, fix, fmt.Sprintf("round trip %s -> %s -> %s of %s: %s", from, to, from, name, f.text))
	}
	if len(res.findings) == 0 {
		k.add(CheckWebhook, SeverityInfo, "", fmt.Sprintf("round trip %s -> %s -> %s of %s passed every check (%d requests, slowest %.0f ms)", from, to, from, name, res.requests, res.maxMs))
	}
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

func humanDuration(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
	return fmt.Sprintf("%dh", int(d.Round(time.Hour).Hours()))
}
