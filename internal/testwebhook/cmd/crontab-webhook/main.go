// Command crontab-webhook runs the test conversion webhook (the CronTab seed example) on
// 127.0.0.1 and writes a copy of testdata/crds/crontab-webhook.yaml pointed at it (url and
// caBundle) into crontab-crd.yaml in the current folder (-crd-out), for trying
// `kubectl crdver convert` by hand, as docs/commands/convert.md does:
//
//	go run ./internal/testwebhook/cmd/crontab-webhook -behaviour lossy &
//	go run ./internal/testwebhook/cmd/crontab-webhook -latency 60ms &
//	go run ./internal/testwebhook/cmd/crontab-webhook -behaviour fail-batch-if -poison bad-host-port &
//
// The first go run compiles it and the API server packages it links: minutes on two cores.
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
	crdOut := flag.String("crd-out", "crontab-crd.yaml", "where to write the CRD with the webhook's url and caBundle (the current folder by default: its own file, not one other users of the machine share)")
	behaviour := flag.String("behaviour", "", "misbehave: lossy, wrong-uid, reorder, ... (empty: well-behaved)")
	poison := flag.String("poison", "", "with -behaviour fail-batch-if or non-200-batch-if, the objects the whole request fails on: bad-host-port (a spec.hostPort whose port is not a number; default: the "+testwebhook.PoisonAnnotation+" annotation)")
	latency := flag.Duration("latency", 0, "add this to every answer (e.g. 2ms: the network to a webhook in a pod; 60ms: over the one-object budget of convert --load)")
	flag.Parse()
	var poisonFn func(map[string]any) bool
	switch *poison {
	case "":
	case "bad-host-port":
		poisonFn = testwebhook.BadHostPort
	default:
		fmt.Fprintf(os.Stderr, "error: -poison %q: use bad-host-port\n", *poison)
		os.Exit(2)
	}
	if err := run(*crdIn, *crdOut, testwebhook.Behaviour(*behaviour), *latency, poisonFn); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(crdIn, crdOut string, b testwebhook.Behaviour, latency time.Duration, poison func(map[string]any) bool) error {
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
	if poison != nil {
		srv.SetPoison(poison)
	}
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
