// Command agnhost serves the Kubernetes e2e conversion webhook — agnhost's
// crd-conversion-webhook (k8s.io/kubernetes/test/images/agnhost/crd-conversion-webhook), the
// webhook the e2e test "CustomResourceConversionWebhook" runs — outside a cluster, for the
// tests of `kubectl crdver convert --load`.
//
// The conversion is agnhost's own handler, converter.ServeExampleConvert, on /crdconvert, with
// agnhost's flags (--tls-cert-file, --tls-private-key-file, --port). Only the server around it
// is written here: agnhost's main builds an in-cluster client first (rest.InClusterConfig,
// fatal outside a pod), which the webhook itself never uses.
//
//	agnhost crd-conversion-webhook --tls-cert-file cert.pem --tls-private-key-file key.pem --port 9443
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/kubernetes/test/images/agnhost/crd-conversion-webhook/converter"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "crd-conversion-webhook" {
		fmt.Fprintln(os.Stderr, "usage: agnhost crd-conversion-webhook --tls-cert-file FILE --tls-private-key-file FILE [--port 443]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("crd-conversion-webhook", flag.ExitOnError)
	certFile := fs.String("tls-cert-file", "", "File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after server cert.")
	keyFile := fs.String("tls-private-key-file", "", "File containing the default x509 private key matching --tls-cert-file.")
	port := fs.Int("port", 443, "Secure port that the webhook listens on")
	_ = fs.Parse(os.Args[2:])

	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agnhost crd-conversion-webhook:", err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/crdconvert", converter.ServeExampleConvert)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	server := &http.Server{
		Addr:              fmt.Sprintf(":%d", *port),
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	if err := server.ListenAndServeTLS("", ""); err != nil {
		fmt.Fprintln(os.Stderr, "agnhost crd-conversion-webhook:", err)
		os.Exit(1)
	}
}
