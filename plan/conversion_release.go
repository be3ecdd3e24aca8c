package plan

// conversion_release.go: what of a CRD's conversion webhook the release's files carry (its
// workload, the Service the CRD names, its certificate, the cainjector annotation that fills
// the caBundle), for the runbook's deploy-webhook step.

import (
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// ReleaseObject is a document of the release's files that is not a CRD.
type ReleaseObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Where names the document: "release.yaml (document 3)".
	Where  string         `json:"where"`
	Object map[string]any `json:"-"`
}

// String names the object as kubectl does: "deployment/name -n namespace".
func (o ReleaseObject) String() string {
	s := strings.ToLower(o.Kind) + "/" + o.Name
	if o.Namespace != "" {
		s += " -n " + o.Namespace
	}
	return s
}

// WebhookKinds are the kinds of document the release's webhook may be made of: plugin keeps
// these of a release's files (ReleaseOptions.Objects), and skips the rest.
var WebhookKinds = []string{"Service", "Deployment", "StatefulSet", "DaemonSet", "Secret", "Certificate", "Issuer", "ClusterIssuer"}

// ReleaseWebhook is what of a CRD's conversion webhook the release's files carry.
type ReleaseWebhook struct {
	// Service is the Service the CRD names; Workloads the Deployments (StatefulSets,
	// DaemonSets) it selects; Certificates the cert-manager Certificates and Issuers, and the
	// Secrets, that serve its certificate or fill the caBundle.
	Service      *ReleaseObject  `json:"service,omitempty"`
	Workloads    []ReleaseObject `json:"workloads,omitempty"`
	Certificates []ReleaseObject `json:"certificates,omitempty"`
	// CAInjection is the CRD's cainjector annotation ("cert-manager.io/inject-ca-from: ns/name").
	CAInjection string `json:"caInjection,omitempty"`
}

// Objects are the documents, in order: what to deploy.
func (w *ReleaseWebhook) Objects() []ReleaseObject {
	var out []ReleaseObject
	out = append(out, w.Workloads...)
	if w.Service != nil {
		out = append(out, *w.Service)
	}
	return append(out, w.Certificates...)
}

// findReleaseWebhook finds next's conversion webhook among the release's documents: nil when
// they hold none of it.
func findReleaseWebhook(next *apiextensionsv1.CustomResourceDefinition, objs []ReleaseObject) *ReleaseWebhook {
	e, err := webhookcheck.EndpointOf(next)
	if err != nil {
		return nil
	}
	w := &ReleaseWebhook{}
	inNS := func(o ReleaseObject, ns string) bool { return o.Namespace == ns || o.Namespace == "" }
	ns := ""
	if e.Service != nil {
		ns = e.Service.Namespace
		for i, o := range objs {
			if o.Kind == "Service" && o.Name == e.Service.Name && inNS(o, ns) {
				w.Service = &objs[i]
				break
			}
		}
	}
	var selector map[string]string
	if w.Service != nil {
		selector = stringMap(w.Service.Object, "spec", "selector")
	}
	var mounted []string
	for _, o := range objs {
		if !slices.Contains([]string{"Deployment", "StatefulSet", "DaemonSet"}, o.Kind) || !inNS(o, ns) || len(selector) == 0 {
			continue
		}
		labels := stringMap(o.Object, "spec", "template", "metadata", "labels")
		if !matches(labels, selector) {
			continue
		}
		w.Workloads = append(w.Workloads, o)
		vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
		for _, v := range vols {
			if name, _, _ := unstructured.NestedString(asMap(v), "secret", "secretName"); name != "" {
				mounted = append(mounted, name)
			}
		}
	}
	var certNS, certName string
	if a, from := webhookcheck.CAInjection(next); a != "" {
		w.CAInjection = a + ": " + from
		certNS, certName, _ = strings.Cut(from, "/")
		if a == webhookcheck.InjectCAFromSecret {
			mounted = append(mounted, certName)
			certName = ""
		}
	}
	var issuers []string
	for _, o := range objs {
		switch {
		case o.Kind == "Certificate" && (o.Name == certName && inNS(o, certNS) || slices.Contains(mounted, secretName(o)) && inNS(o, ns)):
			w.Certificates = append(w.Certificates, o)
			if n, _, _ := unstructured.NestedString(o.Object, "spec", "issuerRef", "name"); n != "" {
				issuers = append(issuers, n)
			}
		case o.Kind == "Secret" && slices.Contains(mounted, o.Name) && (inNS(o, ns) || inNS(o, certNS)):
			w.Certificates = append(w.Certificates, o)
		}
	}
	for _, o := range objs {
		if (o.Kind == "Issuer" || o.Kind == "ClusterIssuer") && slices.Contains(issuers, o.Name) {
			w.Certificates = append(w.Certificates, o)
		}
	}
	if w.Service == nil && len(w.Workloads) == 0 && len(w.Certificates) == 0 {
		return nil
	}
	return w
}

func secretName(o ReleaseObject) string {
	s, _, _ := unstructured.NestedString(o.Object, "spec", "secretName")
	return s
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func stringMap(obj map[string]any, path ...string) map[string]string {
	m, _, _ := unstructured.NestedStringMap(obj, path...)
	return m
}

// matches: labels hold every key and value of selector.
func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// describe names the documents and where they are.
func (w *ReleaseWebhook) describe() string {
	var parts []string
	for _, o := range w.Objects() {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", o.Kind, nsName(o.Namespace, o.Name), o.Where))
	}
	s := strings.Join(parts, ", ")
	if w.CAInjection != "" {
		s += fmt.Sprintf("; cert-manager's cainjector fills the CRDs' caBundle (%s)", w.CAInjection)
	}
	return s
}

func nsName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
