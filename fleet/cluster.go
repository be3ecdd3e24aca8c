// Package fleet runs a command of kubectl-crdver on many clusters and makes one report of it:
// a row per cluster (its Kubernetes version, whether the release is in place, the decision
// table's verdict, the path it needs, what blocks it, how long it took), the clusters grouped
// by what they need, the waves a rollout takes them in (also as an Argo CD ApplicationSet
// RollingSync block), and the upgrade of a release carried out wave after wave.
//
// Each cluster is judged exactly as a single run judges it, by a single run: the caller's
// RunFunc (plugin's runs the engine executable as a child process per cluster, with the
// cluster's --context or --kubeconfig and -o json). The API server code the engine links judges
// as one Kubernetes version per process (kubeversion.Use), so a fleet of clusters of different
// minors cannot be judged in one process; a child per cluster also bounds what a cluster in
// flight holds in memory, frees it when the child exits, and can be stopped (Ctrl-C, a
// timeout) whatever it is doing. This package decides which clusters, in what order, how many
// at once, for how long, and when a rollout stops; it has no cobra and names no flags.
package fleet

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Cluster is one cluster of a fleet and how to reach it: a context of the kubeconfig as
// kubectl loads it (Context; Kubeconfig "" for kubectl's loading rules, KUBECONFIG merged),
// or a kubeconfig file of its own (Kubeconfig, its current context; Context "").
type Cluster struct {
	// Name names the cluster in the report: the context's name, or the kubeconfig file's
	// name without its extension.
	Name       string `json:"name"`
	Context    string `json:"context,omitempty"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
}

// SelectionError is a cluster selection that names what the kubeconfig does not have, or
// selects nothing: the user's input is wrong.
type SelectionError struct{ Msg string }

func (e *SelectionError) Error() string { return e.Msg }

// Contexts selects the contexts named of cfg, in the order named; a name may be a pattern
// (path.Match: "prod-*") that selects every context it matches, in name order. kubeconfig is
// the file cfg was loaded from when one was named ("" for kubectl's loading rules); each
// cluster keeps it. A name or pattern that selects nothing is a *SelectionError naming the
// contexts there are; a context selected twice is taken once.
func Contexts(cfg *clientcmdapi.Config, names []string, kubeconfig string) ([]Cluster, error) {
	all := contextNames(cfg)
	var out []Cluster
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		var matched []string
		if strings.ContainsAny(n, "*?[") {
			for _, c := range all {
				if ok, err := path.Match(n, c); err != nil {
					return nil, &SelectionError{Msg: fmt.Sprintf("context pattern %q: %v", n, err)}
				} else if ok {
					matched = append(matched, c)
				}
			}
		} else if _, ok := cfg.Contexts[n]; ok {
			matched = []string{n}
		}
		if len(matched) == 0 {
			return nil, &SelectionError{Msg: fmt.Sprintf("context %q is not in the kubeconfig (%s)", n, available(all))}
		}
		for _, m := range matched {
			if !seen[m] {
				seen[m] = true
				out = append(out, Cluster{Name: m, Context: m, Kubeconfig: kubeconfig})
			}
		}
	}
	if len(out) == 0 {
		return nil, &SelectionError{Msg: "no context named"}
	}
	return out, nil
}

// AllContexts selects every context of cfg, in name order.
func AllContexts(cfg *clientcmdapi.Config, kubeconfig string) ([]Cluster, error) {
	all := contextNames(cfg)
	if len(all) == 0 {
		return nil, &SelectionError{Msg: "the kubeconfig has no contexts"}
	}
	out := make([]Cluster, 0, len(all))
	for _, c := range all {
		out = append(out, Cluster{Name: c, Context: c, Kubeconfig: kubeconfig})
	}
	return out, nil
}

func contextNames(cfg *clientcmdapi.Config) []string {
	var all []string
	for n := range cfg.Contexts {
		all = append(all, n)
	}
	sort.Strings(all)
	return all
}

func available(all []string) string {
	if len(all) == 0 {
		return "it has none"
	}
	const show = 10
	if len(all) > show {
		return fmt.Sprintf("it has %s and %d more", strings.Join(all[:show], ", "), len(all)-show)
	}
	return "it has " + strings.Join(all, ", ")
}

// KubeconfigDir selects one cluster per kubeconfig file of dir (not its sub-folders), as
// Cluster API writes workload clusters' kubeconfigs: each file reached through its current
// context (or its only context), named by the file's name without its extension and a
// "-kubeconfig" suffix (the file name whole when two files would share a name), in name order.
// Hidden files are left out; files that are not kubeconfigs, or name no context to use, are
// left out with a note each. A folder with no kubeconfig is a *SelectionError.
func KubeconfigDir(dir string) ([]Cluster, []string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, &SelectionError{Msg: fmt.Sprintf("reading the kubeconfigs folder: %v", err)}
	}
	var out []Cluster
	var notes []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		file := filepath.Join(dir, name)
		info, err := os.Stat(file) // follows links (a folder of links to the kubeconfigs)
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		cfg, err := clientcmd.LoadFromFile(file)
		if err != nil || len(cfg.Contexts) == 0 {
			why := "it holds no contexts"
			if err != nil {
				why = firstLine(err.Error())
			}
			notes = append(notes, fmt.Sprintf("%s: not a kubeconfig (%s): left out", file, why))
			continue
		}
		if cfg.CurrentContext == "" && len(cfg.Contexts) > 1 {
			notes = append(notes, fmt.Sprintf("%s: %d contexts and no current-context: left out (set its current-context)", file, len(cfg.Contexts)))
			continue
		}
		if _, ok := cfg.Contexts[cfg.CurrentContext]; cfg.CurrentContext != "" && !ok {
			notes = append(notes, fmt.Sprintf("%s: its current-context %q is not one of its contexts: left out", file, cfg.CurrentContext))
			continue
		}
		c := Cluster{Name: clusterName(name), Kubeconfig: file}
		if cfg.CurrentContext == "" {
			c.Context = contextNames(cfg)[0] // the only one
		}
		out = append(out, c)
	}
	// Two files with one name (a.yaml, a.conf): each is named by its file name.
	count := map[string]int{}
	for _, c := range out {
		count[c.Name]++
	}
	for i := range out {
		if count[out[i].Name] > 1 {
			out[i].Name = filepath.Base(out[i].Kubeconfig)
		}
	}
	if len(out) == 0 {
		return nil, notes, &SelectionError{Msg: fmt.Sprintf("%s holds no kubeconfig file", dir)}
	}
	return out, notes, nil
}

// clusterName is a kubeconfig file's name without its extension and a "-kubeconfig" suffix.
func clusterName(file string) string {
	n := file
	for _, ext := range []string{".yaml", ".yml", ".json", ".kubeconfig", ".conf", ".config", ".cfg"} {
		if strings.HasSuffix(strings.ToLower(n), ext) && len(n) > len(ext) {
			n = n[:len(n)-len(ext)]
			break
		}
	}
	if s := strings.TrimSuffix(n, "-kubeconfig"); s != "" {
		n = s
	}
	return n
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
