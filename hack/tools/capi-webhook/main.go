// Command capi-webhook is Cluster API's own conversion webhook for its core types, built from
// the Go module proxy for kubectl-crdver's tests: controller-runtime's conversion handler
// (sigs.k8s.io/controller-runtime/pkg/webhook/conversion) with Cluster API's scheme and the
// hub/spoke converters Cluster API registers in its manager
// (sigs.k8s.io/cluster-api/core/webhooks/conversion: v1beta1 <-> v1beta2, the hub), served over
// HTTPS at /convert.
//
//	capi-webhook --tls-cert-file CERT --tls-key-file KEY [--listen 127.0.0.1:0]
//	             [--ref-version GROUP=VERSION]... [--ref-version GROUP/KIND=VERSION]...
//	             [--json-content-type]
//
// It prints one line, "serving https://ADDR/convert", once it listens.
//
// Cluster API converts a v1beta2 reference (apiGroup, kind, name) back to a v1beta1 one
// (apiVersion, kind, name) by reading the contract labels of the referenced kind's CRD in the
// cluster (internal/contract.GetAPIVersion, not importable). This program stands in for that
// lookup with --ref-version: the version of each referenced group (or group and kind), the one
// the provider CRDs' contract labels would name. A reference to a group it does not know fails
// the conversion, as Cluster API's does when the CRD or its label is missing.
//
// controller-runtime's handler writes its ConversionReview without a Content-Type, so Go's
// server sends "text/plain; charset=utf-8" (the API server decodes it as JSON all the same).
// --json-content-type sets "application/json" on the answer and changes nothing else.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capiconversion "sigs.k8s.io/cluster-api/core/webhooks/conversion"
)

type refVersions map[string]string

func (r refVersions) String() string { return fmt.Sprint(map[string]string(r)) }

func (r refVersions) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return fmt.Errorf("want GROUP=VERSION or GROUP/KIND=VERSION, got %q", s)
	}
	r[k] = v
	return nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	certFile := flag.String("tls-cert-file", "", "serving certificate (PEM)")
	keyFile := flag.String("tls-key-file", "", "serving key (PEM)")
	refs := refVersions{}
	flag.Var(refs, "ref-version", "GROUP=VERSION or GROUP/KIND=VERSION: the version a v1beta2 reference converts back to (repeatable)")
	jsonContentType := flag.Bool("json-content-type", false, "answer with Content-Type application/json (controller-runtime sends none)")
	flag.Parse()
	if *certFile == "" || *keyFile == "" {
		fmt.Fprintln(os.Stderr, "capi-webhook: --tls-cert-file and --tls-key-file are required")
		os.Exit(2)
	}

	capiconversion.SetAPIVersionGetter(func(_ context.Context, gk schema.GroupKind) (string, error) {
		v, ok := refs[gk.Group+"/"+gk.Kind]
		if !ok {
			v, ok = refs[gk.Group]
		}
		if !ok {
			return "", fmt.Errorf("failed to get apiVersion for kind %s: no --ref-version for group %q", gk.Kind, gk.Group)
		}
		return schema.GroupVersion{Group: gk.Group, Version: v}.String(), nil
	})

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clusterv1beta1.AddToScheme, clusterv1.AddToScheme} {
		if err := add(scheme); err != nil {
			fail(err)
		}
	}
	registry := conversion.NewRegistry()
	for kind, newConverter := range map[string]func(*runtime.Scheme) (conversion.Converter, error){
		"Cluster":            capiconversion.Cluster,
		"ClusterClass":       capiconversion.ClusterClass,
		"Machine":            capiconversion.Machine,
		"MachineSet":         capiconversion.MachineSet,
		"MachineDeployment":  capiconversion.MachineDeployment,
		"MachineHealthCheck": capiconversion.MachineHealthCheck,
		"MachinePool":        capiconversion.MachinePool,
		"MachineDrainRule":   capiconversion.MachineDrainRule,
	} {
		c, err := newConverter(scheme)
		if err != nil {
			fail(fmt.Errorf("%s: %w", kind, err))
		}
		if err := registry.RegisterConverter(schema.GroupKind{Group: clusterv1.GroupVersion.Group, Kind: kind}, c); err != nil {
			fail(err)
		}
	}

	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		fail(err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fail(err)
	}
	mux := http.NewServeMux()
	var handler = conversion.NewWebhookHandler(scheme, registry)
	if *jsonContentType {
		inner := handler
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			inner.ServeHTTP(w, r)
		})
	}
	mux.Handle("/convert", handler)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	fmt.Printf("serving https://%s/convert\n", ln.Addr())
	if err := srv.ServeTLS(ln, "", ""); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "capi-webhook:", err)
	os.Exit(1)
}
