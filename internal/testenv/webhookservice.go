package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// WebhookService makes a webhook running on this machine (127.0.0.1) the Service
// namespace/name, reachable as the API server reaches a service-referenced webhook. envtest runs
// no pods and an EndpointSlice may not hold a loopback address, so the Service is of type
// ExternalName "localhost": for it the API server dials localhost at the port the clientConfig
// names and verifies TLS as <name>.<namespace>.svc (the webhook's certificate must carry that
// name: testwebhook.Options.DNSNames). The namespace is made when missing; the Service is
// removed when the test ends, or by the function returned.
func (e *Env) WebhookService(t testing.TB, namespace, name string) (remove func()) {
	t.Helper()
	ctx := context.Background()
	kube, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"}}
	if _, err := kube.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	remove = func() {
		_ = kube.CoreV1().Services(namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	}
	t.Cleanup(remove)
	return remove
}
