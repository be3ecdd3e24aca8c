package plugin

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/crdver/kubectl-crdver/internal/testca"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

var flagRE = regexp.MustCompile(`(^|[^A-Za-z0-9-])(--[a-z][a-z0-9-]*)`)

// TestConvertMessagesNameRealFlags: every message convert prints about the webhook connection
// (from the convert library's typed errors and hints) names flags the command really has, and
// names the one to use.
func TestConvertMessagesNameRealFlags(t *testing.T) {
	root := NewRootCmd(genericiooptions.NewTestIOStreamsDiscard())
	cmd, _, err := root.Find([]string{"convert"})
	if err != nil {
		t.Fatal(err)
	}
	isFlag := func(name string) bool {
		name = strings.TrimPrefix(name, "--")
		return cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
	}

	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	srv.SetDelay(2 * time.Second)
	urlCRD := writeCRD(t, webhookCRD(t, srv, ""))
	otherCA, err := testca.New()
	if err != nil {
		t.Fatal(err)
	}
	wrongCA := webhookCRD(t, srv, "")
	wrongCA.Spec.Conversion.Webhook.ClientConfig.CABundle = otherCA.CertPEM
	wrongCAFile := writeCRD(t, wrongCA)
	svc := webhookCRD(t, srv, "")
	port := int32(443)
	svc.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{
		Service:  &apiextensionsv1.ServiceReference{Namespace: "default", Name: "crontab-conversion", Port: &port},
		CABundle: srv.CABundle,
	}
	svcFile := writeCRD(t, svc)
	mtls := testwebhook.StartForTest(t, testwebhook.Options{RequireClientCert: true})
	mtlsFile := writeCRD(t, webhookCRD(t, mtls, ""))
	gone := testwebhook.StartForTest(t, testwebhook.Options{})
	goneFile := writeCRD(t, webhookCRD(t, gone, ""))
	gone.Close()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}

	objs := []string{"--to", "v1", "-f", cronTabsV1beta1}
	cases := []struct {
		name string
		args []string
		want string // the flag the message must name
	}{
		{"missing CA file", append([]string{"--crd-file", urlCRD, "--webhook-ca-file", filepath.Join(dir, "missing.pem")}, objs...), "--webhook-ca-file"},
		{"CA file without PEM", append([]string{"--crd-file", urlCRD, "--webhook-ca-file", notPEM}, objs...), "--webhook-ca-file"},
		{"bad client certificate", append([]string{"--crd-file", urlCRD, "--webhook-client-cert", notPEM, "--webhook-client-key", notPEM}, objs...), "--webhook-client-cert"},
		{"bad address", append([]string{"--crd-file", urlCRD, "--webhook-address", "nonsense"}, objs...), "--webhook-address"},
		{"service without an address", append([]string{"--crd-file", svcFile}, objs...), "--webhook-address"},
		{"service proxy for a url", append([]string{"--crd-file", urlCRD, "--via-service-proxy"}, objs...), "--via-service-proxy"},
		{"nothing listening", append([]string{"--crd-file", goneFile}, objs...), "--webhook-address"},
		{"certificate of another CA", append([]string{"--crd-file", wrongCAFile}, objs...), "--webhook-ca-file"},
		{"client certificate demanded", append([]string{"--crd-file", mtlsFile}, objs...), "--webhook-client-cert"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := run(t, "", append([]string{"convert"}, tc.args...)...)
			if got.code == 0 {
				t.Fatalf("exit 0\n%s%s", got.stdout, got.stderr)
			}
			named := map[string]bool{}
			for _, m := range flagRE.FindAllStringSubmatch(got.stdout+got.stderr, -1) {
				named[m[2]] = true
				if !isFlag(m[2]) {
					t.Errorf("the message names %s, which convert does not have:\n%s%s", m[2], got.stdout, got.stderr)
				}
			}
			if !named[tc.want] {
				t.Errorf("the message does not name %s:\n%s%s", tc.want, got.stdout, got.stderr)
			}
		})
	}
}
