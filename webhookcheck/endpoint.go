// Package webhookcheck answers, for the conversion webhook a CRD names, whether its
// configuration is reachable and correct, and what it does to the objects it must convert:
// where it is (Endpoint), its conversionReviewVersions, its caBundle (CABundle), its Service
// (Service: exists, has the port, ready EndpointSlices) or its URL (Handshake: the serving
// certificate), the way to reach it from here (Transport), and a real ConversionReview round
// trip of stored objects through it (RoundTrip), each response checked as kube-apiserver
// checks it and each difference judged by the one loss rule (package convert).
//
// It is the one home of these checks: doctor asks it about the CRDs in place, plan about the
// CRDs a release would apply, before anything is written. It returns data (Problem, Result);
// it prints nothing and names no flag except in advice.
package webhookcheck

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Severities of a Problem.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
	SeverityInfo    = "info"
)

// Problem is one thing found about a conversion webhook.
type Problem struct {
	Severity string `json:"severity"`
	Message  string `json:"message"`
	// Fix is the command or step that fixes it ("" when there is nothing to do).
	Fix string `json:"fix,omitempty"`
	// Down: the webhook cannot answer at all (no Service, no port, no ready endpoint, nothing
	// listening, or a configuration the API server cannot use): every conversion through it
	// fails.
	Down bool `json:"down,omitempty"`
	// config: the configuration's fault (not what runs behind it).
	config bool
}

// Endpoint is where a CRD's conversion webhook is: its clientConfig, read.
type Endpoint struct {
	// CRD is the name of the CRD whose conversion this is.
	CRD    string                               `json:"crd"`
	Config *apiextensionsv1.WebhookClientConfig `json:"-"`
	URL    *url.URL                             `json:"-"`
	// Service is the Service of a service-style webhook (nil for a url).
	Service *apiextensionsv1.ServiceReference `json:"-"`
	// Host and Port to reach (for a service, <service>.<namespace>.svc and the service port).
	Host string `json:"host"`
	Port int    `json:"port"`
	// Name is the DNS name (or IP) the serving certificate must carry.
	Name string `json:"name"`
	// Path of a service-style webhook ("" for none).
	Path string `json:"path,omitempty"`
	// Describe names the webhook in messages: "service ns/name:443/convert" or "url https://…".
	Describe string `json:"describe"`
	// ReviewVersions are spec.conversion.webhook.conversionReviewVersions.
	ReviewVersions []string `json:"reviewVersions"`
}

// IsWebhook reports whether crd converts through a webhook (strategy Webhook).
func IsWebhook(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return crd != nil && crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter
}

// EndpointOf reads the webhook crd names. The error says what is wrong with a configuration
// that names no reachable webhook (strategy Webhook without clientConfig, a url that is not
// https, neither url nor service).
func EndpointOf(crd *apiextensionsv1.CustomResourceDefinition) (*Endpoint, error) {
	if !IsWebhook(crd) {
		return nil, errors.New("spec.conversion.strategy is not Webhook: there is no webhook")
	}
	w := crd.Spec.Conversion.Webhook
	if w == nil || w.ClientConfig == nil {
		return nil, errors.New("strategy Webhook without spec.conversion.webhook.clientConfig: every conversion fails")
	}
	cc := w.ClientConfig
	e := &Endpoint{CRD: crd.Name, Config: cc, ReviewVersions: append([]string{}, w.ConversionReviewVersions...)}
	switch {
	case cc.URL != nil:
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return nil, fmt.Errorf("clientConfig.url %q does not parse: %w", *cc.URL, err)
		}
		if u.Scheme != "https" {
			return nil, fmt.Errorf("clientConfig.url %q is not https", *cc.URL)
		}
		e.URL, e.Host, e.Name, e.Port = u, u.Hostname(), u.Hostname(), 443
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil, fmt.Errorf("clientConfig.url %q: bad port", *cc.URL)
			}
			e.Port = n
		}
		e.Describe = "url " + u.String()
	case cc.Service != nil:
		s := cc.Service
		e.Service, e.Port = s, 443
		if s.Port != nil {
			e.Port = int(*s.Port)
		}
		if s.Path != nil {
			e.Path = *s.Path
		}
		e.Host = s.Name + "." + s.Namespace + ".svc"
		e.Name = e.Host
		e.Describe = fmt.Sprintf("service %s/%s:%d%s", s.Namespace, s.Name, e.Port, e.Path)
	default:
		return nil, errors.New("clientConfig has neither url nor service")
	}
	return e, nil
}

// ReviewVersionProblems: the API server calls a webhook only with a ConversionReview version
// it knows (v1 or v1beta1), the first of conversionReviewVersions it knows.
func (e *Endpoint) ReviewVersionProblems() []Problem {
	if slices.Contains(e.ReviewVersions, "v1") || slices.Contains(e.ReviewVersions, "v1beta1") {
		return nil
	}
	return []Problem{{Severity: SeverityError, Down: true, config: true, Fix: "kubectl edit crd " + e.CRD,
		Message: fmt.Sprintf("conversionReviewVersions %v holds neither v1 nor v1beta1: the API server cannot call this webhook", e.ReviewVersions)}}
}
