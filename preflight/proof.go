package preflight

// proof.go: when the preflight's passes cannot find anything, and what proves it.
//
//   - The loss comparison. A rewrite with conversion None re-encodes each object as it reads
//     at the target; with every holding version's schema identical to the target's, reading
//     at the target gives what reading at the version holding the data gives: nothing
//     readable can be lost, and the comparison is not run.
//   - The dry-run writes. With conversion None, what can refuse the rewrite's no-op write is
//     admission (webhooks, policies) and validation. When no admission webhook or policy can
//     match updates of the resource (their configurations are read; one that cannot be read
//     keeps the dry runs) and the target's schema has no transition rule (a rule on oldSelf is
//     evaluated on every update), an object that the API server's own validation accepts as a
//     create at the target (the preview engine, in this process: a create is validated in
//     full, an update only where ratcheting does not spare it) is accepted by the rewrite's
//     write. The objects it does not accept still go to the API server as dry runs, whose
//     answer stands.

import (
	"context"
	"encoding/json"
	"maps"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/preview"
)

// sameSchemas reports whether every version in versions has the target's schema.
func sameSchemas(crd *apiextensionsv1.CustomResourceDefinition, target string, versions []string) bool {
	t, err := crdinfo.Lookup(crd, target)
	if err != nil {
		return false
	}
	for _, v := range versions {
		h, err := crdinfo.Lookup(crd, v)
		if err != nil || !equality.Semantic.DeepEqual(h.Schema, t.Schema) {
			return false
		}
	}
	return true
}

// hasTransitionRule reports whether the target's schema mentions oldSelf (a transition rule is
// evaluated on every update, unchanged or not), or cannot be read.
func hasTransitionRule(crd *apiextensionsv1.CustomResourceDefinition, target string) bool {
	t, err := crdinfo.Lookup(crd, target)
	if err != nil {
		return true
	}
	b, err := json.Marshal(t.Schema)
	return err != nil || strings.Contains(string(b), "oldSelf")
}

// admissionMatches reports whether a webhook configuration or policy may match an UPDATE of
// group/plural. It errs on the side of matching: selectors, match conditions and bindings are
// not evaluated, and a shape it does not know matches.
func admissionMatches(u *unstructured.Unstructured, policy bool, group, plural string) bool {
	var rules []any
	if policy {
		mc, found, err := unstructured.NestedMap(u.Object, "spec", "matchConstraints")
		if err != nil || !found {
			return true
		}
		rs, ok := mc["resourceRules"].([]any)
		if !ok {
			return true
		}
		rules = rs
	} else {
		hooks, found, err := unstructured.NestedSlice(u.Object, "webhooks")
		if err != nil {
			return true
		}
		if !found {
			return false
		}
		for _, h := range hooks {
			hm, ok := h.(map[string]any)
			if !ok {
				return true
			}
			rs, ok := hm["rules"].([]any)
			if !ok {
				return true
			}
			rules = append(rules, rs...)
		}
	}
	for _, r := range rules {
		rm, ok := r.(map[string]any)
		if !ok {
			return true
		}
		if anyOf(rm["apiGroups"], func(s string) bool { return s == "*" || s == group }) &&
			anyOf(rm["resources"], func(s string) bool {
				res, sub, _ := strings.Cut(s, "/")
				return (res == "*" || res == plural) && (sub == "" || sub == "*")
			}) &&
			anyOf(rm["operations"], func(s string) bool { return s == "*" || s == "UPDATE" }) {
			return true
		}
	}
	return false
}

// anyOf reports whether a list of strings has one for which f holds; a value that is not a
// list of strings counts as holding one.
func anyOf(v any, f func(string) bool) bool {
	l, ok := v.([]any)
	if !ok {
		return true
	}
	for _, x := range l {
		s, ok := x.(string)
		if !ok || f(s) {
			return true
		}
	}
	return false
}

// validIn reports whether the API server's validation accepts u as a create at the target
// (the preview engine, in this process): a create is validated without ratcheting, so an
// object it accepts passes the update's validation too.
func validIn(ctx context.Context, p *preview.Previewer, u *unstructured.Unstructured) bool {
	// u without metadata.resourceVersion: a copy of the top level and of metadata (nothing
	// below them changes, so nothing below is copied).
	c := maps.Clone(u.Object)
	if md, ok := c["metadata"].(map[string]any); ok {
		md = maps.Clone(md)
		delete(md, "resourceVersion")
		c["metadata"] = md
	}
	body, err := (&unstructured.Unstructured{Object: c}).MarshalJSON()
	if err != nil {
		return false
	}
	res, err := p.Create(ctx, body, preview.PreviewOptions{})
	return err == nil && res.Accepted()
}
