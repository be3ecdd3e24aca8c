package migrate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrAccessDenied is wrapped by the error CheckAccess returns when a right is missing.
var ErrAccessDenied = errors.New("access denied")

// Access is one right to check: verb on group/resource[/subresource], in every namespace.
type Access struct {
	Verb, Group, Resource, Subresource, Name string
}

func (a Access) String() string {
	r := a.Resource
	if a.Group != "" {
		r += "." + a.Group
	}
	if a.Subresource != "" {
		r += "/" + a.Subresource
	}
	if a.Name != "" {
		r += " " + a.Name
	}
	return a.Verb + " " + r
}

// NeededAccess lists the rights a migration of crd needs: list, get and update on its
// resource in every namespace; update on the CRD when the storage version is switched;
// update on customresourcedefinitions/status when storedVersions will be trimmed.
func NeededAccess(crd *apiextensionsv1.CustomResourceDefinition, switchStorage, trim bool) []Access {
	out := []Access{
		{Verb: "list", Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural},
		{Verb: "get", Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural},
		{Verb: "update", Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural},
	}
	if switchStorage {
		out = append(out, Access{Verb: "update", Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions", Name: crd.Name})
	}
	if trim {
		out = append(out, Access{Verb: "update", Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions", Subresource: "status", Name: crd.Name})
	}
	return out
}

// CheckAccess asks the API server (SelfSubjectAccessReview) whether the caller has every right
// in needed, and returns an error wrapping ErrAccessDenied that lists the missing ones.
func CheckAccess(ctx context.Context, c *Clients, needed []Access) error {
	var missing []string
	for _, a := range needed {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource, Name: a.Name,
			},
		}}
		got, err := c.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("checking your rights (%s): %w", a, err)
		}
		if !got.Status.Allowed {
			missing = append(missing, a.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: you may not %s (in all namespaces); nothing was written: ask for these RBAC rights", ErrAccessDenied, strings.Join(missing, ", "))
	}
	return nil
}
