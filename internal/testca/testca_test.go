package testca

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"
)

func TestIssuedCertificatesVerifyAgainstTheCA(t *testing.T) {
	ca, err := New()
	if err != nil {
		t.Fatal(err)
	}
	other, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, client := range []bool{false, true} {
		certPEM, keyPEM, err := ca.Issue("127.0.0.1", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, client)
		if err != nil || len(keyPEM) == 0 {
			t.Fatal(err)
		}
		block, _ := pem.Decode(certPEM)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		usage := x509.ExtKeyUsageServerAuth
		if client {
			usage = x509.ExtKeyUsageClientAuth
		}
		for _, tc := range []struct {
			ca   *CA
			want bool
		}{{ca, true}, {other, false}} {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(tc.ca.CertPEM)
			_, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{usage}})
			if (err == nil) != tc.want {
				t.Errorf("client=%v: verifying against the %s CA: %v", client, map[bool]string{true: "issuing", false: "other"}[tc.want], err)
			}
		}
	}
}
