package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// admissionKinds are the configurations whose webhooks or policies can refuse or change a
// write, and the policies' bindings (a binding switches a policy on for some objects: it is
// part of the fingerprint, never matched itself).
var admissionKinds = []struct {
	resource string
	versions []string // tried in order; none served means none can exist
	policy   bool
	binding  bool
}{
	{"validatingwebhookconfigurations", []string{"v1"}, false, false},
	{"mutatingwebhookconfigurations", []string{"v1"}, false, false},
	{"validatingadmissionpolicies", []string{"v1", "v1beta1"}, true, false},
	{"mutatingadmissionpolicies", []string{"v1", "v1beta1", "v1alpha1"}, true, false},
	{"validatingadmissionpolicybindings", []string{"v1", "v1beta1"}, false, true},
	{"mutatingadmissionpolicybindings", []string{"v1", "v1beta1", "v1alpha1"}, false, true},
}

// Admission is the cluster's admission configuration as read at one moment: what a write's
// outcome depends on besides the object and its CRD. The preflight keeps its fingerprint with
// the verdicts it records (evidence.go); restore compares it before its write pass with the
// one its dry-run pass ran under.
type Admission struct {
	// OK: every kind could be read (a kind the cluster does not serve has none).
	OK bool
	// Read says what was read, for reports: "2 validatingwebhookconfigurations, ...".
	Read string
	// Fingerprint is a digest of every configuration's and binding's kind, name and
	// resourceVersion: it changes when one is added, removed or changed.
	Fingerprint string
	configs     []admissionConfig
}

type admissionConfig struct {
	u      unstructured.Unstructured
	policy bool
}

// ReadAdmission lists the cluster's webhook configurations, admission policies and their
// bindings (a few requests, each paced by wait when it is not nil).
func ReadAdmission(ctx context.Context, dyn dynamic.Interface, wait func(context.Context) error) Admission {
	var counts, ids []string
	a := Admission{OK: true}
	for _, k := range admissionKinds {
		for _, v := range k.versions {
			if wait != nil {
				if err := wait(ctx); err != nil {
					return Admission{}
				}
			}
			list, err := dyn.Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: v, Resource: k.resource}).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return Admission{}
			}
			for i := range list.Items {
				ids = append(ids, k.resource+"/"+list.Items[i].GetName()+"@"+list.Items[i].GetResourceVersion())
				if !k.binding {
					a.configs = append(a.configs, admissionConfig{u: list.Items[i], policy: k.policy})
				}
			}
			if !k.binding {
				counts = append(counts, fmt.Sprintf("%d %s", len(list.Items), k.resource))
			}
			break
		}
	}
	sort.Strings(ids)
	a.Read, a.Fingerprint = strings.Join(counts, ", "), digest(ids)
	if len(a.configs) == 0 {
		a.Read = "the cluster has none"
	}
	return a
}

// Matches reports whether a webhook or policy of a may match an UPDATE of group/plural
// (admissionMatches: on the side of matching).
func (a Admission) Matches(group, plural string) bool {
	for i := range a.configs {
		if admissionMatches(&a.configs[i].u, a.configs[i].policy, group, plural) {
			return true
		}
	}
	return false
}
