package migrate

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// MoveEntries returns obj as a rewrite at version sends it, with every managedFields entry of
// another version of crd's group moved to version within the write (Rewriter.moveEntries), and
// the number of entries moved: the preflight's dry run of a rewrite sends the same write. dyn
// reads obj at an entry's version where a move needs it. obj is not modified.
func MoveEntries(ctx context.Context, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition, version string, obj *unstructured.Unstructured) (*unstructured.Unstructured, int) {
	r := &Rewriter{c: &Clients{Dynamic: dyn}, crd: crd, version: version}
	return r.moveEntries(ctx, obj)
}
