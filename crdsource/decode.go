package crdsource

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/crdschema"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/manifest"
)

// NotCRDError is a document that is not a CustomResourceDefinition where one was required
// (Strict: the caller asked for every document to be one).
type NotCRDError struct {
	Where, What string
	Strict      bool
}

func (e *NotCRDError) Error() string {
	return fmt.Sprintf("%s: %s is not a CustomResourceDefinition (want apiextensions.k8s.io/v1 or v1beta1)", e.Where, e.What)
}

// Describe is a document's apiVersion and kind as written, for messages.
func Describe(d manifest.Document) string {
	what := strings.TrimSpace(d.APIVersion + " " + d.Kind)
	if what == "" {
		what = "a document with no apiVersion and kind"
	}
	return what
}

func inputErrorf(format string, args ...any) error {
	return &manifest.InputError{Err: fmt.Errorf(format, args...)}
}

// Decode decodes one CRD document and checks it with the API server's validation as
// Kubernetes kubeVersion (the version the process runs as: kubeversion.Require; zero: whichever
// it is): an invalid CRD is an error (a *manifest.InputError wrapping a
// *crdschema.InvalidError that names the version). A v1beta1 CRD,
// which API servers since 1.22 refuse altogether, is still read for analysis (explain shows its
// non-structural schema, for one); what v1 validation says of it is a warning on warnOut, when
// warnOut is not nil.
func Decode(ctx context.Context, d manifest.Document, kubeVersion kubeversion.Version, warnOut io.Writer) (*apiextensionsv1.CustomResourceDefinition, error) {
	kv, err := kubeversion.Require(kubeVersion)
	if err != nil {
		return nil, err
	}
	crd, err := DecodeOne(d)
	if err != nil {
		return nil, err
	}
	errs, err := crdschema.Validate(ctx, crd)
	if err != nil {
		return nil, inputErrorf("%s: %s: %v", d.Where(), crd.Name, err)
	}
	if len(errs) == 0 {
		return crd, nil
	}
	invalid := inputErrorf("%s: %w", d.Where(), &crdschema.InvalidError{Name: crd.Name, Errors: errs, KubeVersion: kv.String()})
	if d.APIVersion == "apiextensions.k8s.io/v1beta1" {
		if warnOut != nil {
			fmt.Fprintf(warnOut, "warning: %s (apiextensions.k8s.io/v1beta1 is refused by API servers since 1.22; as v1 it would be refused for these errors)\n", invalid)
		}
		return crd, nil
	}
	return nil, invalid
}

// DecodeOne decodes one CRD document (v1 or v1beta1) without validating it. A document without
// status.storedVersions keeps them unknown (nil): decoding would default them to the storage
// version, an assumption, not a fact.
func DecodeOne(d manifest.Document) (*apiextensionsv1.CustomResourceDefinition, error) {
	if !crdinfo.IsCRD(d.APIVersion, d.Kind) {
		return nil, &manifest.InputError{Err: &NotCRDError{Where: d.Where(), What: Describe(d)}}
	}
	crd, err := crdinfo.Decode(d.JSON)
	if err != nil {
		return nil, inputErrorf("%s: %v", d.Where(), err)
	}
	if crd.Name == "" {
		return nil, inputErrorf("%s: CustomResourceDefinition has no metadata.name", d.Where())
	}
	if !hasStoredVersions(d.JSON) {
		// Only the cluster knows what it stored.
		crd.Status.StoredVersions = nil
	}
	return crd, nil
}

// hasStoredVersions reports whether a CRD document carries a non-empty status.storedVersions.
func hasStoredVersions(js []byte) bool {
	var doc struct {
		Status struct {
			StoredVersions []string `json:"storedVersions"`
		} `json:"status"`
	}
	return json.Unmarshal(js, &doc) == nil && len(doc.Status.StoredVersions) > 0
}
