// Command crontab-webhook runs the test conversion webhook (the CronTab seed example) on
// 127.0.0.1 and writes a copy of testdata/crds/crontab-webhook.yaml pointed at it (url and
// caBundle), for trying `kubectl crdver convert` by hand:
//
//	go run ./internal/testwebhook/cmd/crontab-webhook -crd-out /tmp/crontab-crd.yaml -behaviour lossy
//	go run ./internal/testwebhook/cmd/crontab-webhook -crd-out /tmp/crontab-crd.yaml -latency 60ms
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

func main() {
	crdIn := flag.String("crd", filepath.Join("testdata", "crds", "crontab-webhook.yaml"), "CRD to point at the webhook")
	crdOut := flag.String("crd-out", filepath.Join(os.TempDir(), "crontab-crd.yaml"), "where to write the CRD with the webhook's url and caBundle (not in the clone: it is not a file of the repository)")
	behaviour := flag.String("behaviour", "", "misbehave: lossy, wrong-uid, reorder, ... (empty: well-behaved)")
	latency := flag.Duration("latency", 0, "add this to every answer (e.g. 2ms: the network to a webhook in a pod; 60ms: over the one-object budget of convert --load)")
	flag.Parse()
	if err := run(*crdIn, *crdOut, testwebhook.Behaviour(*behaviour), *latency); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(crdIn, crdOut string, b testwebhook.Behaviour, latency time.Duration) error {
	data, err := os.ReadFile(crdIn)
	if err != nil {
		return err
	}
	crd, err := crdinfo.Decode(data)
	if err != nil {
		return fmt.Errorf("%s: %w", crdIn, err)
	}
	srv, err := testwebhook.Start(testwebhook.Options{})
	if err != nil {
		return err
	}
	defer srv.Close()
	srv.Set(b)
	srv.SetLatency(latency)
	crd.Spec.Conversion = srv.WebhookConversion("v1", "v1beta1")
	crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	if err := os.WriteFile(crdOut, out, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "conversion webhook (%s) listening on %s; CRD written to %s; Ctrl-C stops it\n", behaviourName(b), srv.URL, crdOut)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}

func behaviourName(b testwebhook.Behaviour) string {
	if b == "" {
		return "well-behaved"
	}
	return string(b)
}
