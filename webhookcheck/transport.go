package webhookcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/convert"
)

// Target is a webhook to ask instead of the one a CRD names: the release's webhook running
// elsewhere (a local binary, a port-forward: URL; a sandbox namespace: Service).
type Target struct {
	URL     *url.URL
	Service *apiextensionsv1.ServiceReference
}

// ParseTarget reads "https://HOST:PORT[/PATH]" or "NAMESPACE/SERVICE[:PORT]".
func ParseTarget(s string) (*Target, error) {
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a URL: %w", s, err)
		}
		if u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("%q: a webhook URL is https://HOST:PORT[/PATH]", s)
		}
		return &Target{URL: u}, nil
	}
	ns, rest, ok := strings.Cut(s, "/")
	if !ok || ns == "" || rest == "" || strings.Contains(rest, "/") {
		return nil, fmt.Errorf("%q: give https://HOST:PORT[/PATH] or NAMESPACE/SERVICE[:PORT]", s)
	}
	ref := &apiextensionsv1.ServiceReference{Namespace: ns, Name: rest}
	if name, p, ok := strings.Cut(rest, ":"); ok {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: the port %q is not a number from 1 to 65535", s, p)
		}
		port := int32(n)
		ref.Name, ref.Port = name, &port
	}
	return &Target{Service: ref}, nil
}

// String is the target as given.
func (t *Target) String() string {
	if t.URL != nil {
		return t.URL.String()
	}
	s := t.Service.Namespace + "/" + t.Service.Name
	if t.Service.Port != nil {
		s += ":" + strconv.Itoa(int(*t.Service.Port))
	}
	return s
}

// Reach says how to reach a webhook from here.
type Reach struct {
	// Target, when set, is asked instead of the webhook the CRD names.
	Target *Target
	// Proxy is core/v1's REST client (clientset.CoreV1().RESTClient()), for the API server's
	// service proxy; nil: no cluster, a service is not reachable.
	Proxy rest.Interface
	// CABundle verifies TLS when the CRD's own caBundle is empty (the live CRD's, which
	// cert-manager's cainjector filled: CABundleFor); CANote says where it comes from.
	CABundle []byte
	CANote   string
	// Timeout bounds each request (0: convert.DefaultTimeout, the API server's 30 s).
	Timeout time.Duration
}

// ErrNoWay: the webhook is a Service and there is no way to it from here (no cluster).
var ErrNoWay = errors.New("the webhook is a Service and there is no cluster to reach it through")

// Transport is the way to crd's conversion webhook from here, verifying what can be verified:
//
//   - Reach.Target's URL: its host and port, with its path, TLS verified against the caBundle as
//     the clientConfig's name (<service>.<namespace>.svc, or the url's host), as the API server
//     verifies it; not verified, and said, when there is no caBundle to verify with;
//   - Reach.Target's Service: that Service through the API server's service proxy (the proxy
//     does not verify the caBundle: said);
//   - the CRD's url: directly, TLS verified against its caBundle (the system roots without one,
//     as the API server);
//   - the CRD's Service of type ExternalName: <externalName>:<port>, which is what the API
//     server dials, TLS verified as <service>.<namespace>.svc;
//   - the CRD's Service: through the API server's service proxy (caBundle not verified: said).
//
// st is what ServiceCheck found of the CRD's Service; nil: the Service is read through
// Reach.Proxy here (to tell an ExternalName).
func Transport(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, st *ServiceState, r Reach) (convert.Transport, error) {
	if !IsWebhook(crd) || crd.Spec.Conversion.Webhook == nil || crd.Spec.Conversion.Webhook.ClientConfig == nil {
		return nil, fmt.Errorf("%s: spec.conversion.strategy is not Webhook: there is no webhook to call", crd.Name)
	}
	crd = crd.DeepCopy()
	cc := crd.Spec.Conversion.Webhook.ClientConfig
	if st == nil && cc.Service != nil && r.Target == nil && r.Proxy != nil {
		var svc corev1.Service
		if err := r.Proxy.Get().Namespace(cc.Service.Namespace).Resource("services").Name(cc.Service.Name).Do(ctx).Into(&svc); err == nil && svc.Spec.Type == corev1.ServiceTypeExternalName {
			st = &ServiceState{Exists: true, ExternalName: svc.Spec.ExternalName}
		}
	}
	note := ""
	if len(bytes.TrimSpace(cc.CABundle)) == 0 && len(r.CABundle) > 0 {
		cc.CABundle, note = r.CABundle, " (caBundle: "+r.CANote+")"
	}
	describe := func(t convert.Transport, err error) (convert.Transport, error) {
		if err != nil || note == "" {
			return t, err
		}
		return described{Transport: t, suffix: note}, nil
	}
	switch t := r.Target; {
	case t != nil && t.URL != nil:
		if p := t.URL.EscapedPath(); p != "" {
			if cc.Service != nil {
				cc.Service.Path = &p
			} else if u, err := url.Parse(*cc.URL); err == nil {
				u.Path, u.RawPath = t.URL.Path, t.URL.RawPath
				s := u.String()
				cc.URL = &s
			}
		}
		addr := t.URL.Host
		if t.URL.Port() == "" {
			addr = net.JoinHostPort(t.URL.Hostname(), "443")
		}
		o := convert.TransportOptions{Address: addr, Timeout: r.Timeout}
		if len(bytes.TrimSpace(cc.CABundle)) == 0 {
			o.InsecureSkipVerify = true
			note = ": the CRD has no caBundle to verify it with"
			if r.CANote != "" {
				note += " (" + r.CANote + ")"
			}
		}
		return describe(convert.NewHTTPTransport(crd, o))
	case t != nil && t.Service != nil:
		if r.Proxy == nil {
			return nil, ErrNoWay
		}
		svc := t.Service.DeepCopy()
		if svc.Path == nil && cc.Service != nil {
			svc.Path = cc.Service.Path
		}
		cc.URL, cc.Service = nil, svc
		return describe(convert.NewServiceProxyTransport(crd, r.Proxy, r.Timeout))
	case cc.URL != nil:
		return describe(convert.NewHTTPTransport(crd, convert.TransportOptions{Timeout: r.Timeout}))
	case st != nil && st.ExternalName != "":
		port := 443
		if cc.Service.Port != nil {
			port = int(*cc.Service.Port)
		}
		return describe(convert.NewHTTPTransport(crd, convert.TransportOptions{Address: net.JoinHostPort(st.ExternalName, strconv.Itoa(port)), Timeout: r.Timeout}))
	case r.Proxy == nil:
		return nil, ErrNoWay
	}
	return describe(convert.NewServiceProxyTransport(crd, r.Proxy, r.Timeout))
}

// described adds to a transport's description.
type described struct {
	convert.Transport
	suffix string
}

func (d described) Describe() string { return d.Transport.Describe() + d.suffix }

// Annotations of cert-manager's cainjector that fill a CRD's conversion caBundle.
const (
	InjectCAFrom       = "cert-manager.io/inject-ca-from"
	InjectCAFromSecret = "cert-manager.io/inject-ca-from-secret"
)

// CAInjection is the cainjector annotation of crd ("" when none) and its value: the
// Certificate (namespace/name) or Secret whose CA cert-manager's cainjector writes into the
// caBundle after the CRD is applied.
func CAInjection(crd *apiextensionsv1.CustomResourceDefinition) (annotation, from string) {
	for _, a := range []string{InjectCAFrom, InjectCAFromSecret} {
		if v := crd.Annotations[a]; v != "" {
			return a, v
		}
	}
	return "", ""
}

// CABundleFor is the caBundle to verify next's webhook with when next's own is empty because
// cert-manager's cainjector fills it after the apply: live's, when live is injected from the
// same source and already holds one. note says so; nil when there is none to use.
func CABundleFor(next, live *apiextensionsv1.CustomResourceDefinition) (bundle []byte, note string) {
	a, from := CAInjection(next)
	if a == "" {
		return nil, ""
	}
	if live != nil && IsWebhook(live) && live.Spec.Conversion.Webhook != nil && live.Spec.Conversion.Webhook.ClientConfig != nil {
		la, lfrom := CAInjection(live)
		if b := live.Spec.Conversion.Webhook.ClientConfig.CABundle; la == a && lfrom == from && len(bytes.TrimSpace(b)) > 0 {
			return b, fmt.Sprintf("the live CRD's, which cert-manager's cainjector filled from %s (%s)", from, a)
		}
	}
	return nil, fmt.Sprintf("cert-manager's cainjector fills it from %s after the apply (%s)", from, a)
}
