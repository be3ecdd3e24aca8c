package ownership

import "strings"

// Role is what a field manager's entry says about how it writes the object.
type Role string

const (
	// RoleApplier: the entry comes from applying manifests (operation Apply, or a client-side
	// apply by a known GitOps or deployment tool). The manifests are applied again on every
	// sync, at the apiVersion they name: the manager still writes that version.
	RoleApplier Role = "applier"
	// RoleOneTime: a person's one-off command (kubectl create, edit, label, patch…): it wrote
	// once, at the version named, and is not expected to write again.
	RoleOneTime Role = "one-time"
	// RoleController: any other Update: a controller or a program whose next write may or may
	// not use the same version (the entry cannot tell).
	RoleController Role = "controller"
)

// appliers are managers that write with Update but apply manifests on every sync.
var appliers = map[string]bool{
	"kubectl-client-side-apply":     true,
	"kustomize-controller":          true,
	"helm-controller":               true,
	"helm":                          true,
	"argocd-controller":             true,
	"argocd-application-controller": true,
	"argo-cd":                       true,
	"flux":                          true,
	"flux-client-side-apply":        true,
	"kapp":                          true,
}

// oneTime are kubectl's own managers for one-off commands (kubectl sets "kubectl-<verb>").
var oneTime = map[string]bool{
	"kubectl-create": true, "kubectl-edit": true, "kubectl-label": true, "kubectl-annotate": true,
	"kubectl-patch": true, "kubectl-replace": true, "kubectl-set": true, "kubectl-scale": true,
	"kubectl-taint": true, "kubectl-rollout": true, "kubectl": true,
}

// RoleOf classifies one managedFields entry by its manager and operation.
func RoleOf(manager, operation string) Role {
	switch {
	case operation == "Apply":
		return RoleApplier
	case appliers[manager] || strings.HasPrefix(manager, "flux-"):
		return RoleApplier
	case oneTime[manager]:
		return RoleOneTime
	}
	return RoleController
}
