package plan

// runbook_gitops.go: the manifests the cluster knows of — Flux Kustomizations (with their
// GitRepository) and Argo CD Applications that apply objects of a CRD — so that the runbook's
// change-writers step gives the command that converts them.

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/internal/pager"
)

// GitOpsSource is a GitOps object that applies manifests from a repository.
type GitOpsSource struct {
	// Tool is Flux or Argo CD.
	Tool string `json:"tool"`
	// Object names it: "Kustomization flux-system/apps", "Application argocd/guestbook".
	Object string `json:"object"`
	// Repo is the repository URL (the Kustomization's GitRepository spec.url; the
	// Application's spec.source.repoURL), Revision its branch, tag or revision when given.
	Repo     string `json:"repo"`
	Revision string `json:"revision,omitempty"`
	// Path is the folder of the manifests in the repository ("." for its root).
	Path string `json:"path"`
	// Kinds it applies, as group/Kind (from the Kustomization's status.inventory, the
	// Application's status.resources).
	Kinds []string `json:"kinds"`
}

var (
	fluxKustomizations = []schema.GroupVersionResource{
		{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"},
		{Group: "kustomize.toolkit.fluxcd.io", Version: "v1beta2", Resource: "kustomizations"},
	}
	fluxGitRepositories = []schema.GroupVersionResource{
		{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"},
		{Group: "source.toolkit.fluxcd.io", Version: "v1beta2", Resource: "gitrepositories"},
	}
	argoApplications = []schema.GroupVersionResource{
		{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"},
	}
)

// FindGitOpsSources lists the Flux Kustomizations and Argo CD Applications of the cluster and
// what they apply. A tool whose CRDs are not installed (or that may not be listed) has none;
// the notes say which could not be read for another reason.
func FindGitOpsSources(ctx context.Context, c dynamic.Interface) ([]GitOpsSource, []string) {
	var out []GitOpsSource
	var notes []string
	ks, err := listFirstServed(ctx, c, fluxKustomizations)
	if err != nil {
		notes = append(notes, fmt.Sprintf("Flux Kustomizations could not be listed: %v", err))
	}
	var repos []unstructured.Unstructured
	if len(ks) > 0 {
		if repos, err = listFirstServed(ctx, c, fluxGitRepositories); err != nil {
			notes = append(notes, fmt.Sprintf("Flux GitRepositories could not be listed: %v", err))
		}
	}
	for i := range ks {
		if s, ok := fluxSource(&ks[i], repos); ok {
			out = append(out, s)
		}
	}
	apps, err := listFirstServed(ctx, c, argoApplications)
	if err != nil {
		notes = append(notes, fmt.Sprintf("Argo CD Applications could not be listed: %v", err))
	}
	for i := range apps {
		out = append(out, argoSources(&apps[i])...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Object < out[j].Object })
	return out, notes
}

// listFirstServed lists the objects at the first of gvrs the API server serves, a page at a
// time (internal/pager: one request per page, an expired continue token resumed); none when it
// serves none of them (the tool is not installed) or forbids the list.
func listFirstServed(ctx context.Context, c dynamic.Interface, gvrs []schema.GroupVersionResource) ([]unstructured.Unstructured, error) {
	for _, gvr := range gvrs {
		var items []unstructured.Unstructured
		err := pager.Each(ctx, pager.Dynamic(c.Resource(gvr), pager.Options{}), func(l *unstructured.UnstructuredList) error {
			items = append(items, l.Items...)
			return nil
		})
		switch {
		case err == nil:
			return items, nil
		case isAbsent(err):
			continue
		default:
			return nil, err
		}
	}
	return nil, nil
}

func fluxSource(k *unstructured.Unstructured, repos []unstructured.Unstructured) (GitOpsSource, bool) {
	path, _, _ := unstructured.NestedString(k.Object, "spec", "path")
	kind, _, _ := unstructured.NestedString(k.Object, "spec", "sourceRef", "kind")
	name, _, _ := unstructured.NestedString(k.Object, "spec", "sourceRef", "name")
	ns, _, _ := unstructured.NestedString(k.Object, "spec", "sourceRef", "namespace")
	if kind != "GitRepository" || name == "" {
		return GitOpsSource{}, false // an OCIRepository or a Bucket: no repository to clone
	}
	if ns == "" {
		ns = k.GetNamespace()
	}
	s := GitOpsSource{Tool: "Flux", Object: "Kustomization " + k.GetNamespace() + "/" + k.GetName(), Path: cleanPath(path)}
	for i := range repos {
		if repos[i].GetNamespace() == ns && repos[i].GetName() == name {
			s.Repo, _, _ = unstructured.NestedString(repos[i].Object, "spec", "url")
			for _, ref := range []string{"branch", "tag", "semver", "name", "commit"} {
				if v, _, _ := unstructured.NestedString(repos[i].Object, "spec", "ref", ref); v != "" {
					s.Revision = ref + " " + v
					break
				}
			}
		}
	}
	if s.Repo == "" {
		s.Repo = "GitRepository " + ns + "/" + name
	}
	entries, _, _ := unstructured.NestedSlice(k.Object, "status", "inventory", "entries")
	for _, e := range entries {
		m, _ := e.(map[string]any)
		id, _ := m["id"].(string)
		// <namespace>_<name>_<group>_<kind> (Flux's object inventory; names hold no "_").
		if parts := strings.Split(id, "_"); len(parts) == 4 {
			s.addKind(parts[2], parts[3])
		}
	}
	return s, true
}

func argoSources(a *unstructured.Unstructured) []GitOpsSource {
	var kinds []string
	resources, _, _ := unstructured.NestedSlice(a.Object, "status", "resources")
	for _, r := range resources {
		m, _ := r.(map[string]any)
		g, _ := m["group"].(string)
		k, _ := m["kind"].(string)
		if k != "" && !slices.Contains(kinds, g+"/"+k) {
			kinds = append(kinds, g+"/"+k)
		}
	}
	var srcs []map[string]any
	if s, ok, _ := unstructured.NestedMap(a.Object, "spec", "source"); ok {
		srcs = append(srcs, s)
	}
	more, _, _ := unstructured.NestedSlice(a.Object, "spec", "sources")
	for _, s := range more {
		if m, ok := s.(map[string]any); ok {
			srcs = append(srcs, m)
		}
	}
	var out []GitOpsSource
	for _, src := range srcs {
		repo, _ := src["repoURL"].(string)
		path, hasPath := src["path"].(string)
		if repo == "" || !hasPath {
			continue // a Helm chart from a chart repository: no folder of manifests
		}
		s := GitOpsSource{Tool: "Argo CD", Object: "Application " + a.GetNamespace() + "/" + a.GetName(), Repo: repo, Path: cleanPath(path), Kinds: kinds}
		if rev, _ := src["targetRevision"].(string); rev != "" {
			s.Revision = "revision " + rev
		}
		out = append(out, s)
	}
	return out
}

func (s *GitOpsSource) addKind(group, kind string) {
	if k := group + "/" + kind; !slices.Contains(s.Kinds, k) {
		s.Kinds = append(s.Kinds, k)
	}
}

func cleanPath(p string) string {
	if p == "" || p == "/" {
		return "."
	}
	return strings.TrimPrefix(p, "/")
}

// safeWord: a word the shell reads as it is.
var safeWord = regexp.MustCompile(`^[A-Za-z0-9._/@:=+-]+$`)

func shellWord(s string) string {
	if safeWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// changeWritersStep is the change-writers step of p (why: writersToChange's text), with, for
// every GitOps source that applies objects of p's kind, the command that converts its
// manifests in a clone of its repository.
func (b *runbook) changeWritersStep(p *crdPlan, why string) RunbookStep {
	st := RunbookStep{Phase: PhaseFix, Action: ActionChangeWriters, CRDs: []string{p.next.Name}, Manual: true, Why: why}
	kind := p.next.Spec.Group + "/" + p.next.Spec.Names.Kind
	var where []string
	for _, s := range b.opts.GitOps {
		if !slices.Contains(s.Kinds, kind) {
			continue
		}
		repo := s.Repo
		if s.Revision != "" {
			repo += " (" + s.Revision + ")"
		}
		where = append(where, fmt.Sprintf("%s %s applies them from %s, path %s", s.Tool, s.Object, repo, s.Path))
		st.Commands = append(st.Commands, convertCommand(p, b.file, s.Path))
	}
	if len(where) > 0 {
		st.Why += fmt.Sprintf("; %s: in a clone of each repository, at its root, run the command, review the diff, commit and push (other manifests that name the old version: docs/commands/convert.md, \"Finding the manifests\")", strings.Join(where, "; "))
	}
	return st
}

// convertCommand rewrites the manifests under path to p's new storage version, through the
// new CRD's conversion (the release's file), proven lossless before each file is written.
func convertCommand(p *crdPlan, file, path string) string {
	crdFiles := strings.ReplaceAll(file, filesSep, " --crd-file ")
	cmd := fmt.Sprintf("kubectl crdver convert %s --crd-file %s --to %s -f %s --write", p.next.Name, crdFiles, p.storage, shellWord(path))
	if c := p.next.Spec.Conversion; c != nil && c.Strategy == apiextensionsv1.WebhookConverter && c.Webhook != nil && c.Webhook.ClientConfig != nil && c.Webhook.ClientConfig.Service != nil {
		cmd += " --via-service-proxy"
	}
	return cmd
}

// isAbsent: the API server does not serve the resource (the tool's CRD is not installed).
func isAbsent(err error) bool { return apierrors.IsNotFound(err) }

// needGitOpsSources reports whether the runbook of items has a change-writers step, the one
// step that names GitOps sources.
func needGitOpsSources(items []Item) bool {
	for i := range items {
		if p := analyse(&items[i]); p.live != nil && writersToChange(p) != "" {
			return true
		}
	}
	return false
}
