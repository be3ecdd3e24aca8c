package crdsource

import (
	"context"
	"fmt"
	"io"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/manifest"
)

// ClusterError is a call to the API server that failed; Doing says what it was doing
// ("listing CustomResourceDefinitions").
type ClusterError struct {
	Doing string
	Err   error
}

func (e *ClusterError) Error() string { return e.Doing + ": " + e.Err.Error() }
func (e *ClusterError) Unwrap() error { return e.Err }

// Source is where CRDs come from: Files when there are any, else the cluster (Client). It
// caches what it read: stdin can be read once, and the cluster is listed once however many
// names are resolved. Not safe for concurrent use.
type Source struct {
	// Files are the files, directories, URLs or "-" (Stdin) to read CRDs from.
	Files []string
	// Input tunes how Files are read (Recursive, Stdin).
	Input manifest.Options
	// StrictKinds makes a document of Files that is not a CRD an error (*NotCRDError with
	// Strict) instead of skipping it.
	StrictKinds bool
	// Skipped, when not nil, is called with every document of Files that is skipped.
	Skipped func(manifest.Document)
	// Warn, when not nil, gets the warnings about v1beta1 CRDs that v1 validation refuses.
	Warn io.Writer
	// KubeVersion, when not zero, is the Kubernetes version the files are validated as: the
	// process must run as it (kubeversion.Use, chosen by the caller; Load refuses another
	// with a *kubeversion.NotInUseError). Zero: the version the process runs as.
	KubeVersion kubeversion.Version
	// Client is the cluster's apiextensions clientset, asked for on first use; its error is
	// returned as it is.
	Client func() (apiextensionsclient.Interface, error)

	loaded []*apiextensionsv1.CustomResourceDefinition
	listed []*apiextensionsv1.CustomResourceDefinition
}

// Offline reports whether the CRDs come from files.
func (s *Source) Offline() bool { return len(s.Files) > 0 }

// Where names the files, for messages.
func (s *Source) Where() string { return strings.Join(s.Files, ", ") }

// All returns every CRD of the files, or of the cluster (listed once).
func (s *Source) All(ctx context.Context) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if s.Offline() {
		return s.Load(ctx)
	}
	if s.listed != nil {
		return s.listed, nil
	}
	c, err := s.Client()
	if err != nil {
		return nil, err
	}
	crds, err := List(ctx, c)
	if err != nil {
		return nil, err
	}
	s.listed = crds
	return crds, nil
}

// List lists every CRD of the cluster in one call.
func List(ctx context.Context, c apiextensionsclient.Interface) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	list, err := c.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, &ClusterError{Doing: "listing CustomResourceDefinitions", Err: err}
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// One resolves name to a single CRD. In files, an empty name is fine when they hold exactly
// one CRD. In the cluster, a full name is one GET; anything else (plural, singular, short
// name, kind) is matched against the list of CRDs. A name that matches none, or several, is a
// *manifest.InputError (wrapping ErrNoMatch for none).
func (s *Source) One(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	if s.Offline() {
		crds, err := s.Load(ctx)
		if err != nil {
			return nil, err
		}
		if name == "" {
			if len(crds) == 1 {
				return crds[0], nil
			}
			return nil, inputErrorf("%s holds %d CustomResourceDefinitions (%s): name the one you mean", s.Where(), len(crds), strings.Join(Names(crds), ", "))
		}
		crd, err := Match(crds, name)
		if err != nil {
			return nil, inputErrorf("%s: %w", s.Where(), err)
		}
		return crd, nil
	}
	if name == "" {
		return nil, inputErrorf("name a CustomResourceDefinition (e.g. crontabs.stable.example.com)")
	}
	if strings.Contains(name, ".") && s.listed == nil {
		// Most likely a full name: one GET, the cheapest answer.
		c, err := s.Client()
		if err != nil {
			return nil, err
		}
		crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return crd, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, &ClusterError{Doing: fmt.Sprintf("getting CustomResourceDefinition %q", name), Err: err}
		}
	}
	crds, err := s.All(ctx)
	if err != nil {
		return nil, err
	}
	crd, err := Match(crds, name)
	if err != nil {
		return nil, &manifest.InputError{Err: err}
	}
	return crd, nil
}

// ByGroupKind finds the CRD that defines kind in group, among the files or the cluster's CRDs
// (one LIST, whatever the number of kinds asked for).
func (s *Source) ByGroupKind(ctx context.Context, group, kind string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := s.All(ctx)
	if err != nil {
		return nil, err
	}
	var found *apiextensionsv1.CustomResourceDefinition
	for _, c := range crds {
		if c.Spec.Group == group && c.Spec.Names.Kind == kind {
			found = c
		}
	}
	if found != nil {
		return found, nil
	}
	if s.Offline() {
		return nil, inputErrorf("no CustomResourceDefinition in %s defines kind %s of group %q (have: %s)", s.Where(), kind, group, strings.Join(Names(crds), ", "))
	}
	return nil, inputErrorf("%w kind %s of group %q", ErrNoMatch, kind, group)
}

// OneOrPath is the one place that decides whether a command's single argument names a CRD or
// is a field path: with files, it is the CRD when it names one of them, else the path (and
// the files must hold exactly one CRD); from the cluster it is always the CRD. It returns the
// CRD and the path.
func (s *Source) OneOrPath(ctx context.Context, name, path string) (*apiextensionsv1.CustomResourceDefinition, string, error) {
	if s.Offline() && path == "" && name != "" {
		crds, err := s.Load(ctx)
		if err != nil {
			return nil, "", err
		}
		if crd, err := Match(crds, name); err == nil {
			return crd, "", nil
		}
		if len(crds) == 1 {
			return crds[0], name, nil
		}
	}
	crd, err := s.One(ctx, name)
	return crd, path, err
}

// Load reads the CRDs of the files, one document at a time: documents that are not CRDs are
// skipped (Skipped; an error with StrictKinds), and every CRD is checked with the API server's
// own validation (Decode). The result is cached: stdin can be read once.
func (s *Source) Load(ctx context.Context) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if s.loaded != nil {
		return s.loaded, nil
	}
	kv, err := kubeversion.Require(s.KubeVersion)
	if err != nil {
		return nil, err
	}
	crds := []*apiextensionsv1.CustomResourceDefinition{}
	docs, skipped := 0, 0
	var first manifest.Document
	err = manifest.EachDocument(ctx, s.Files, s.Input, func(d manifest.Document) error {
		docs++
		if !crdinfo.IsCRD(d.APIVersion, d.Kind) {
			if s.StrictKinds {
				return &manifest.InputError{Err: &NotCRDError{Where: d.Where(), What: Describe(d), Strict: true}}
			}
			if skipped == 0 {
				first = d
			}
			skipped++
			if s.Skipped != nil {
				s.Skipped(d)
			}
			return nil
		}
		crd, err := Decode(ctx, d, kv, s.Warn)
		if err != nil {
			return err
		}
		crds = append(crds, crd)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if docs == 0 {
		return nil, inputErrorf("%s: no documents found", s.Where())
	}
	if len(crds) == 0 {
		return nil, NoCRDFound(s.Where(), skipped, first)
	}
	s.loaded = crds
	return crds, nil
}

// NoCRDFound is the error for input that holds documents but no CustomResourceDefinition
// (every command words it so): where names the input, skipped counts its documents, first is
// the first of them.
func NoCRDFound(where string, skipped int, first manifest.Document) error {
	return inputErrorf("%s: no CustomResourceDefinition found: the first of %s is %s: %s is not a CustomResourceDefinition", where, plural(skipped, "document"), first.Where(), Describe(first))
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
