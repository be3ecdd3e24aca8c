package webhookcheck

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ServiceState is what the cluster holds of a service-style webhook's Service.
type ServiceState struct {
	Exists bool `json:"exists"`
	// HasPort: the Service has the port the clientConfig names.
	HasPort bool `json:"hasPort"`
	// Ready is the number of ready endpoint addresses in its EndpointSlices.
	Ready int `json:"ready"`
	// ExternalName is the host of a Service of type ExternalName: the API server dials
	// <externalName>:<port> for it, with no endpoints.
	ExternalName string `json:"externalName,omitempty"`
}

// Answering reports whether the Service can carry a conversion request: it exists with the
// port and a ready endpoint, or it is an ExternalName.
func (s *ServiceState) Answering() bool {
	return s != nil && s.Exists && (s.ExternalName != "" || s.HasPort && s.Ready > 0)
}

// Service checks a service-style webhook's Service in the cluster: it exists, it has the port
// the clientConfig names, and its EndpointSlices hold a ready endpoint (an ExternalName needs
// neither). The error is for a check that could not complete (forbidden, unreachable): its
// answer is unknown.
func (e *Endpoint) ServiceCheck(ctx context.Context, kube kubernetes.Interface) (*ServiceState, []Problem, error) {
	s := e.Service
	st := &ServiceState{}
	fix := fmt.Sprintf("kubectl -n %s get service,endpointslices -l kubernetes.io/service-name=%s", s.Namespace, s.Name)
	svc, err := kube.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return st, []Problem{{Severity: SeverityError, Down: true, Fix: fmt.Sprintf("deploy the webhook's Service %s/%s, or fix spec.conversion.webhook.clientConfig.service", s.Namespace, s.Name),
			Message: fmt.Sprintf("webhook is down: Service %s/%s does not exist", s.Namespace, s.Name)}}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading Service %s/%s: %w", s.Namespace, s.Name, err)
	}
	st.Exists = true
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		st.ExternalName = svc.Spec.ExternalName
		return st, nil, nil
	}
	for _, p := range svc.Spec.Ports {
		if int(p.Port) == e.Port {
			st.HasPort = true
		}
	}
	if !st.HasPort {
		return st, []Problem{{Severity: SeverityError, Down: true, Fix: fix, Message: fmt.Sprintf("webhook is down: Service %s/%s has no port %d", s.Namespace, s.Name, e.Port)}}, nil
	}
	slices, err := kube.DiscoveryV1().EndpointSlices(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + s.Name})
	if err != nil {
		return nil, nil, fmt.Errorf("listing EndpointSlices of Service %s/%s: %w", s.Namespace, s.Name, err)
	}
	for _, sl := range slices.Items {
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				st.Ready += len(ep.Addresses)
			}
		}
	}
	if st.Ready == 0 {
		return st, []Problem{{Severity: SeverityError, Down: true, Fix: fix, Message: fmt.Sprintf("webhook is down: Service %s/%s has no ready endpoints", s.Namespace, s.Name)}}, nil
	}
	return st, nil, nil
}
