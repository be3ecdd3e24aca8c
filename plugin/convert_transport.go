package plugin

// convert_transport.go: the way to the webhook, and the convert library's typed connection
// errors worded with this command's flags.

import (
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/convert"
)

// transport builds the way to the webhook.
func (o *ConvertOptions) transport(crd *apiextensionsv1.CustomResourceDefinition) (convert.Transport, error) {
	if o.ViaServiceProxy {
		cs, err := o.g.clients()
		if err != nil {
			return nil, err
		}
		kube, err := cs.Kube()
		if err != nil {
			return nil, err
		}
		t, err := convert.NewServiceProxyTransport(crd, kube.CoreV1().RESTClient(), o.Timeout)
		if err != nil {
			return nil, Usage(transportError(err))
		}
		return t, nil
	}
	t, err := convert.NewHTTPTransport(crd, convert.TransportOptions{
		Address: o.WebhookAddress, CAFile: o.CAFile, InsecureSkipVerify: o.Insecure,
		ClientCert: o.ClientCert, ClientKey: o.ClientKey, Timeout: o.Timeout,
	})
	if err != nil {
		return nil, Usage(transportError(err))
	}
	return t, nil
}

// webhookFlags are convert's flags for the convert.TransportOptions fields.
var webhookFlags = map[string]string{
	"Address":    "--webhook-address",
	"CAFile":     "--webhook-ca-file",
	"ClientCert": "--webhook-client-cert",
	"ClientKey":  "--webhook-client-key",
}

// transportError words the convert library's typed errors with this command's flags.
func transportError(err error) error {
	var oe *convert.OptionError
	var sa *convert.ServiceAddressError
	var ns *convert.NotServiceError
	switch {
	case errors.As(err, &oe):
		if oe.Field == "ClientCert" && oe.Value != "" {
			return fmt.Errorf("--webhook-client-cert %q/--webhook-client-key: %w", oe.Value, oe.Err)
		}
		return fmt.Errorf("%s %q: %w", webhookFlags[oe.Field], oe.Value, oe.Err)
	case errors.As(err, &sa):
		return fmt.Errorf("%s: the conversion webhook is service %s/%s port %d: give --webhook-address HOST:PORT (e.g. after kubectl port-forward -n %s svc/%s 9443:%d) or use --via-service-proxy",
			sa.CRD, sa.Namespace, sa.Name, sa.Port, sa.Namespace, sa.Name, sa.Port)
	case errors.As(err, &ns):
		return fmt.Errorf("%s: --via-service-proxy needs a service-referenced webhook, but clientConfig has url %q: call it directly", ns.CRD, ns.URL)
	}
	return err
}

// webhookAdvice words a transport failure's hint with this command's flags.
func webhookAdvice(h convert.Hint) string {
	switch h {
	case convert.HintTimeout:
		return "the API server would fail the conversion too; make the webhook faster, or raise --timeout to measure it"
	case convert.HintCA:
		return "fix spec.conversion.webhook.clientConfig.caBundle, or give the right CA with --webhook-ca-file"
	case convert.HintTLS:
		return "check the webhook's certificate, the caBundle, and --webhook-client-cert/--webhook-client-key if it demands a client certificate"
	case convert.HintConnect:
		return "is the webhook running? for a service, run kubectl port-forward and give --webhook-address, or use --via-service-proxy"
	}
	return h.Advice()
}
