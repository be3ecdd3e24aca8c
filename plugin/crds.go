package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/crdver/kubectl-crdver/crdsource"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/printers"
)

// crdSource is a command's crdsource.Source: files (-f/--crd-file) or, when none are given,
// the cluster; its errors given exit codes and worded with the command's flags.
type crdSource struct {
	g     *Globals
	files []string
	flag  string // the flag name, for messages
	short string // its shorthand, if any
	// input holds -R, -v and --strict-kinds, when the command has them.
	input *inputFlags
	// cmd gives fromFiles the command's context (Ctrl-C).
	cmd *cobra.Command
	// kube is --kube-version, when the command has it: CRD files are validated as that
	// Kubernetes version, which the run then judges as (else as the version the run judges as).
	kube *kubeVersionFlag

	src     *crdsource.Source
	skipped *printers.Skipped
	// read counts the bytes of the files read so far.
	read *InputProgress
	// reported: the skipped documents were counted on stderr.
	reported bool
}

func addCRDFileFlag(cmd *cobra.Command, g *Globals, name, shorthand string) *crdSource {
	s := &crdSource{g: g, flag: name, short: shorthand, cmd: cmd}
	cmd.Flags().StringSliceVarP(&s.files, name, shorthand, nil,
		"Read CRDs from these files or directories (- for stdin) instead of the cluster; apiextensions.k8s.io v1 or v1beta1, several documents per file")
	return s
}

func (s *crdSource) offline() bool { return len(s.files) > 0 }

// lib builds the library's source from the flags, once they are parsed.
func (s *crdSource) lib() *crdsource.Source {
	if s.src != nil {
		return s.src
	}
	s.skipped = &printers.Skipped{What: "not a CustomResourceDefinition", One: "is not a CustomResourceDefinition"}
	s.src = &crdsource.Source{Files: s.files, Input: s.inputOptions(), Skipped: s.skipped.Add, Client: s.g.crdClient}
	if s.input != nil {
		s.src.StrictKinds = s.input.StrictKinds
		if s.input.Verbose {
			s.src.Warn = s.g.ErrOut
		}
	}
	if s.kube != nil {
		s.src.KubeVersion = s.kube.v
	}
	return s.src
}

// sourceError gives crdsource's errors their exit code and this command's flag wording.
func (s *crdSource) sourceError(err error) error {
	var (
		ee  *ExitError
		ce  *crdsource.ClusterError
		nce *crdsource.NotCRDError
	)
	switch {
	case err == nil || errors.As(err, &ee):
		return err
	case errors.As(err, &ce):
		return clusterError(ce.Doing, ce.Err)
	case errors.As(err, &nce) && nce.Strict:
		return UsageErrorf("%s: %s is not a CustomResourceDefinition (want apiextensions.k8s.io/v1 or v1beta1; --strict-kinds)", nce.Where, nce.What)
	case errors.Is(err, crdsource.ErrNoMatch) && !s.offline():
		return Usage(fmt.Errorf("%w (kubectl get crds lists them)", err))
	}
	return inputError(err)
}

// all returns every CRD of the files, or of the cluster (listed once per run).
func (s *crdSource) all(ctx context.Context) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if s.offline() {
		return s.load(ctx)
	}
	crds, err := s.lib().All(ctx)
	return crds, s.sourceError(err)
}

// one resolves name to a single CRD (crdsource.Source.One).
func (s *crdSource) one(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	if s.offline() {
		if _, err := s.load(ctx); err != nil {
			return nil, err
		}
	} else if name == "" {
		return nil, UsageErrorf("name a CustomResourceDefinition (e.g. crontabs.stable.example.com), or read one from a file with --%s", s.flag)
	}
	crd, err := s.lib().One(ctx, name)
	return crd, s.sourceError(err)
}

// byGroupKind finds the CRD that defines kind in group, among the files or the cluster's CRDs.
func (s *crdSource) byGroupKind(ctx context.Context, group, kind string) (*apiextensionsv1.CustomResourceDefinition, error) {
	if _, err := s.all(ctx); err != nil {
		return nil, err
	}
	crd, err := s.lib().ByGroupKind(ctx, group, kind)
	return crd, s.sourceError(err)
}

// crdOrPath decides whether a command's single argument names a CRD or is a field path
// (crdsource.Source.OneOrPath).
func (s *crdSource) crdOrPath(ctx context.Context, name, path string) (*apiextensionsv1.CustomResourceDefinition, string, error) {
	if s.offline() {
		if _, err := s.fromFiles(); err != nil {
			return nil, "", err
		}
	} else if name == "" {
		_, err := s.one(ctx, name)
		return nil, path, err
	}
	crd, path, err := s.lib().OneOrPath(ctx, name, path)
	return crd, path, s.sourceError(err)
}

// fromFiles reads every CRD of the files (see load) with the command's context.
func (s *crdSource) fromFiles() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	ctx := context.Background()
	if s.cmd != nil && s.cmd.Context() != nil {
		ctx = s.cmd.Context()
	}
	return s.load(ctx)
}

// load reads the CRDs of the files (crdsource.Source.Load, cached: stdin can be read once) and
// counts the skipped documents on stderr (listed with -v).
func (s *crdSource) load(ctx context.Context) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if err := s.kube.use(s.g); err != nil {
		return nil, err
	}
	crds, err := s.lib().Load(ctx)
	if err != nil && ctx.Err() != nil && s.read != nil {
		flag := "--" + s.flag
		if s.short != "" {
			flag = "-" + s.short
		}
		return nil, Unavailable(fmt.Errorf("interrupted while reading %s, after %s: nothing was done", flag, printers.Bytes(s.read.Read.Load())))
	}
	if err != nil {
		return nil, s.sourceError(err)
	}
	if !s.reported {
		s.reported = true
		if err := s.skipped.Report(s.g.ErrOut, s.input != nil && s.input.Verbose, "-v"); err != nil {
			return nil, err
		}
	}
	return crds, nil
}

func (s *crdSource) inputOptions() InputOptions {
	s.read = &InputProgress{}
	o := InputOptions{Stdin: s.g.In, Progress: s.read}
	if s.input != nil {
		o.Recursive = s.input.Recursive
	}
	return o
}

// decodeCRD is crdsource.Decode (validated as the run's Kubernetes version v) with exit codes.
func decodeCRD(ctx context.Context, d Document, v kubeversion.Version, warnOut io.Writer) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := crdsource.Decode(ctx, d, v, warnOut)
	return crd, inputError(err)
}

// decodeOne is crdsource.DecodeOne with exit codes.
func decodeOne(d Document) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := crdsource.DecodeOne(d)
	return crd, inputError(err)
}

// completeCRDNames completes CRD names from the cluster for shell completion.
func completeCRDNames(g *Globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := g.crdClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		crds, err := listCRDs(cmd.Context(), c)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, crd := range crds {
			if strings.HasPrefix(crd.Name, toComplete) {
				out = append(out, crd.Name)
			}
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// listCRDs lists every CRD of the cluster in one call (crdsource.List with exit codes).
func listCRDs(ctx context.Context, c apiextensionsclient.Interface) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := crdsource.List(ctx, c)
	var ce *crdsource.ClusterError
	if errors.As(err, &ce) {
		return nil, clusterError(ce.Doing, ce.Err)
	}
	return crds, err
}
