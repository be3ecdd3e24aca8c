package doctor

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/crdver/kubectl-crdver/crdschema"
)

func newCore(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createService creates default/crontab-conversion with port 443 (no selector: envtest runs
// no controllers, the EndpointSlice is made by hand).
func createService(ctx context.Context, c kubernetes.Interface) error {
	_, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "crontab-conversion"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
	}, metav1.CreateOptions{})
	return err
}

func createEndpointSlice(ctx context.Context, c kubernetes.Interface, ready bool) error {
	port, name, proto := int32(9443), "https", corev1.ProtocolTCP
	_, err := c.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "crontab-conversion-1", Labels: map[string]string{"kubernetes.io/service-name": "crontab-conversion"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}, metav1.CreateOptions{})
	return err
}

func mustInternal(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) *apiextensions.JSONSchemaProps {
	t.Helper()
	vs, err := crdschema.SchemaFor(crd, crd.Spec.Versions[0].Name)
	if err != nil || vs.Internal == nil {
		t.Fatalf("schema of %s: %v", crd.Name, err)
	}
	return vs.Internal
}
