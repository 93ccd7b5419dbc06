package pki

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

func TestIssueVerifies(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("git.internet.test", "model.internet.test", "10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatalf("key pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.CertPEM) {
		t.Fatal("CA PEM not accepted")
	}
	other, err := NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	otherRoots := x509.NewCertPool()
	otherRoots.AppendCertsFromPEM(other.CertPEM)

	tests := []struct {
		name    string
		host    string
		roots   *x509.CertPool
		wantErr bool
	}{
		{name: "first name", host: "git.internet.test", roots: roots},
		{name: "second name", host: "model.internet.test", roots: roots},
		{name: "ip", host: "10.1.2.3", roots: roots},
		{name: "unlisted name", host: "blocked.internet.test", roots: roots, wantErr: true},
		{name: "suffix is not a wildcard", host: "x.git.internet.test", roots: roots, wantErr: true},
		{name: "another CA", host: "git.internet.test", roots: otherRoots, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := leaf.Verify(x509.VerifyOptions{DNSName: tt.host, Roots: tt.roots})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Verify(%s) error = %v, want error %v", tt.host, err, tt.wantErr)
			}
		})
	}
	if _, err := ca.Issue(); err == nil {
		t.Fatal("Issue() with no names succeeded")
	}
}
