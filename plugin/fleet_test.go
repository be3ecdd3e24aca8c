package plugin

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestFleetFlagsRefused: fleet flags that do not fit together, or with the command's own, are
// usage errors that say what to do, before any cluster is read.
func TestFleetFlagsRefused(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	for _, n := range []string{"prod", "staging"} {
		cfg.Clusters[n] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
		cfg.AuthInfos[n] = &clientcmdapi.AuthInfo{}
		cfg.Contexts[n] = &clientcmdapi.Context{Cluster: n, AuthInfo: n}
	}
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	release := repoFile("testdata", "crds", "crontab-release.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "-f", release, "--contexts", "prod", "--all-contexts"}, "choose the clusters with one of --contexts, --all-contexts or --kubeconfigs"},
		{[]string{"plan", "-f", release, "--contexts", "prod", "--context", "staging"}, "--context names one cluster"},
		{[]string{"plan", "-f", release, "--kubeconfigs", t.TempDir(), "--kubeconfig", kc}, "leave out --kubeconfig"},
		{[]string{"plan", "-f", release, "--parallel", "3"}, "--parallel is for a fleet"},
		{[]string{"plan", "-f", release, "--waves", "1,rest"}, "--waves is for a fleet"},
		{[]string{"plan", "-f", release, "--contexts", "prod", "--parallel", "0"}, "--parallel must be at least 1"},
		{[]string{"plan", "-f", release, "--contexts", "prod", "--cluster-timeout", "-1s"}, "--cluster-timeout must be 0"},
		{[]string{"plan", "-f", release, "--contexts", "prod", "--waves", "rest"}, `--waves "rest": give the size of the first wave`},
		{[]string{"plan", "-f", release, "--contexts", "prod", "--waves", "1", "--canary", "1"}, "with --waves or --canary, not both"},
		{[]string{"plan", "-f", release, "--contexts", "prod", "--canary", "0"}, "--canary must be at least 1"},
		{[]string{"plan", "-f", release, "--contexts", "prod", "--wave-label", "not a key!"}, `--wave-label "not a key!" is not a label key`},
		{[]string{"plan", "-f", release, "--contexts", "prod", "--old-file", release}, "--old-file cannot be used on a fleet: an offline plan has no cluster"},
		{[]string{"upgrade", "-f", release, "--contexts", "prod", "--backup", "b.yaml"}, "--backup cannot be used on a fleet: each cluster has its own backup file, named after it (--backup-dir)"},
		{[]string{"upgrade", "-f", release, "--contexts", "prod", "--intermediate-crds"}, "--intermediate-crds"},
		{[]string{"upgrade", "status", "-f", release, "--contexts", "prod", "--checkpoint", "c.json"}, "--checkpoint cannot be used on a fleet"},
		{[]string{"versions", "--contexts", "prod"}, "on a fleet, versions summarises every CRD of each cluster: add --all"},
		{[]string{"doctor", "--contexts", "qa", "--kubeconfig", kc}, `--contexts: context "qa" is not in the kubeconfig (it has prod, staging)`},
		{[]string{"doctor", "--contexts", "qa-*", "--kubeconfig", kc}, `--contexts: context "qa-*" is not in the kubeconfig`},
		{[]string{"doctor", "--kubeconfigs", filepath.Join(t.TempDir(), "none")}, "--kubeconfigs"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			res := run(t, "", c.args...)
			if res.code != ExitUsage || !strings.Contains(res.stderr, c.want) {
				t.Errorf("exit %d, want 2 and %q:\n%s", res.code, c.want, res.stderr)
			}
		})
	}
}

func TestFileSafe(t *testing.T) {
	for in, want := range map[string]string{
		"prod-eu.1":                            "prod-eu.1",
		"arn:aws:eks:eu-west-1:1:cluster/prod": "arn_aws_eks_eu-west-1_1_cluster_prod",
		"kind-kind":                            "kind-kind",
	} {
		if got := fileSafe(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
