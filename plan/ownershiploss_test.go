package plan

import (
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/kubeversion"
)

// TestOwnershipLossThroughWebhook: through a conversion webhook plan cannot read the object at
// an entry's version nor convert it there, so an entry the rewrite must read to move gives
// "unknown" (an unknown reason of the item, not an ownership-loss finding); an entry that
// moves without a read gives nothing. Judged as 1.37 nothing is predicted at all.
func TestOwnershipLossThroughWebhook(t *testing.T) {
	live := gadgetsCRD(t, "hook.plan.example.com", "v1", [][2]string{{"v1", "a gone"}, {"v2", "a"}})
	live.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
	next := live.DeepCopy()
	next.Spec.Versions[0].Storage, next.Spec.Versions[1].Storage = false, true
	o, note := newOwnersAtRewrite(live, next, "v2", []string{"v1"}, kubeversion.Version{Major: 1, Minor: 34})
	if o == nil {
		t.Fatalf("no prediction judged as 1.34: %s", note)
	}
	obj := func(fields string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "hook.plan.example.com/v2", "kind": "Gadget",
			"metadata": map[string]any{"name": "g", "namespace": "default"}, "spec": map[string]any{"a": "1"}}}
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "gitops", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "hook.plan.example.com/v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}})
		return u
	}
	needsRead := obj(`{"f:spec":{"f:a":{},"f:gone":{}}}`)
	got := o.predict(t.Context(), nil, needsRead, needsRead.Object)
	if got == nil || !strings.Contains(got.Unknown, "webhook") || len(got.Lost) > 0 {
		t.Errorf("an entry that needs a read through the webhook: %+v, want unknown", got)
	}
	if got := o.predict(t.Context(), nil, obj(`{"f:spec":{"f:a":{}}}`), needsRead.Object); got != nil {
		t.Errorf("an entry that moves without a read: %+v, want nothing", got)
	}
	f := Finding{Namespace: "default", Name: "g", ManagersLost: &ManagersLost{Unknown: "needs the webhook"}}
	it := &Item{StorageVersion: StorageChange{After: "v2"}, Apply: Apply{Allowed: true}, Objects: Objects{Findings: []Finding{f}}}
	judge(nil, it)
	if slices.Contains(f.kinds(), KindOwnershipLoss) || it.Verdict != VerdictUnknown || len(it.UnknownReasons) != 1 || !strings.Contains(it.UnknownReasons[0], "default/g") {
		t.Errorf("kinds %v verdict %s unknown %q", f.kinds(), it.Verdict, it.UnknownReasons)
	}
	if o, _ := newOwnersAtRewrite(live, next, "v2", []string{"v1"}, kubeversion.Newest); o != nil {
		t.Errorf("judged as %s (which keeps the live entries of a failed update), a prediction is made", kubeversion.Newest)
	}
}
