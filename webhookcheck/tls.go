package webhookcheck

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// ExpiryWarning is how long before a certificate expires it is reported.
const ExpiryWarning = 30 * 24 * time.Hour

// CABundle parses a webhook's caBundle and reports certificates that do not parse, expired or
// expire soon. It returns the pool (nil when there is no usable caBundle). An empty caBundle
// of a service-style webhook is an error: the API server then verifies the serving
// certificate against its own system roots, which do not sign the <service>.<namespace>.svc
// names of in-cluster webhooks (Check: unreachable, whatever the service proxy, which verifies
// nothing, answers).
func (e *Endpoint) CABundle(bundle []byte, now time.Time) (*x509.CertPool, []Problem) {
	fix := "renew the CA and update spec.conversion.webhook.clientConfig.caBundle (kubectl edit crd " + e.CRD + ")"
	if len(bytes.TrimSpace(bundle)) == 0 {
		if e.Service != nil {
			return nil, []Problem{{Severity: SeverityError, Fix: "set spec.conversion.webhook.clientConfig.caBundle to the CA that signed the webhook's serving certificate (kubectl edit crd " + e.CRD + ")",
				Message: fmt.Sprintf("no caBundle: the API server verifies %s against its own system roots, which do not sign %s: every conversion fails unless they hold the CA that signed its certificate", e.Describe, e.Name)}}
		}
		return nil, []Problem{{Severity: SeverityInfo, Message: "no caBundle: the API server verifies the webhook against its own system roots"}}
	}
	var out []Problem
	pool := x509.NewCertPool()
	rest := bundle
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			out = append(out, Problem{Severity: SeverityError, Fix: fix, Message: fmt.Sprintf("caBundle certificate %d does not parse: %v", n+1, err)})
			continue
		}
		n++
		pool.AddCert(cert)
		if p := Expiry("caBundle certificate "+strconv.Quote(cert.Subject.CommonName), cert, fix, now); p != nil {
			out = append(out, *p)
		}
	}
	if n == 0 {
		return nil, append(out, Problem{Severity: SeverityError, Down: true, config: true, Fix: fix, Message: "caBundle holds no PEM certificate: the API server cannot verify the webhook and every conversion fails"})
	}
	return pool, out
}

// Expiry reports a certificate that expired, is not valid yet, or expires within
// ExpiryWarning; nil when it is in date.
func Expiry(what string, cert *x509.Certificate, fix string, now time.Time) *Problem {
	switch {
	case now.After(cert.NotAfter):
		return &Problem{Severity: SeverityError, Fix: fix, Message: fmt.Sprintf("%s expired at %s", what, cert.NotAfter.UTC().Format(time.RFC3339))}
	case now.Before(cert.NotBefore):
		return &Problem{Severity: SeverityError, Fix: fix, Message: fmt.Sprintf("%s is not valid before %s", what, cert.NotBefore.UTC().Format(time.RFC3339))}
	case cert.NotAfter.Sub(now) < ExpiryWarning:
		return &Problem{Severity: SeverityWarning, Fix: fix, Message: fmt.Sprintf("%s expires in %s (%s)", what, humanDuration(cert.NotAfter.Sub(now)), cert.NotAfter.UTC().Format(time.RFC3339))}
	}
	return nil
}

// Handshake checks a url-style webhook without sending a request: that its host resolves and
// something listens (IP literals need no resolving) and, by a TLS handshake, that its serving
// certificate chains to pool (the caBundle), names the host and is in date. ok: the handshake
// succeeded.
func (e *Endpoint) Handshake(ctx context.Context, pool *x509.CertPool, now time.Time, timeout time.Duration) (ok bool, out []Problem) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fix := "check that the webhook is running and listening at " + e.URL.String()
	d := &net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(e.Host, strconv.Itoa(e.Port)))
	if err != nil {
		return false, []Problem{{Severity: SeverityError, Down: true, Fix: fix, Message: fmt.Sprintf("webhook is down: %s: %v", e.Describe, unwrapOp(err))}}
	}
	defer conn.Close()
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // the chain is verified below, against the caBundle
	if net.ParseIP(e.Host) == nil {
		cfg.ServerName = e.Host
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return false, []Problem{{Severity: SeverityError, Down: true, Fix: fix, Message: fmt.Sprintf("TLS handshake with %s failed: %v", e.Describe, unwrapOp(err))}}
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return false, []Problem{{Severity: SeverityError, Down: true, Fix: fix, Message: fmt.Sprintf("%s sent no serving certificate", e.Describe)}}
	}
	return true, e.ServingCert(certs, pool, now)
}

// ServingCert checks a serving certificate chain: its expiry, that it chains to pool (the
// caBundle) and that it names Endpoint.Name.
func (e *Endpoint) ServingCert(certs []*x509.Certificate, pool *x509.CertPool, now time.Time) []Problem {
	var out []Problem
	leaf := certs[0]
	fix := "reissue the webhook's serving certificate and update the caBundle together (kubectl edit crd " + e.CRD + ")"
	if p := Expiry("serving certificate of "+e.Describe, leaf, fix, now); p != nil {
		out = append(out, *p)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if pool != nil {
		if _, err := leaf.Verify(opts); err != nil {
			var inv x509.CertificateInvalidError
			if !(errors.As(err, &inv) && inv.Reason == x509.Expired) {
				out = append(out, Problem{Severity: SeverityError, Fix: fix, Message: fmt.Sprintf("serving certificate of %s does not chain to the caBundle: %v", e.Describe, err)})
			}
		}
	}
	if err := leaf.VerifyHostname(e.Name); err != nil {
		names := append(append([]string{}, leaf.DNSNames...), ipStrings(leaf.IPAddresses)...)
		out = append(out, Problem{Severity: SeverityError, Fix: fix, Message: fmt.Sprintf("serving certificate of %s does not name %s (it names %s)", e.Describe, e.Name, strings.Join(names, ", "))})
	}
	return out
}

func ipStrings(ips []net.IP) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

func humanDuration(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
	return fmt.Sprintf("%dh", int(d.Round(time.Hour).Hours()))
}
