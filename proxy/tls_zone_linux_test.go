package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	"github.com/spindlenet/spindle/internal/certgen"
)

// TestUpstreamTLSZonedIPChecked: a TLS pool's server given as an IPv6
// address with a zone (a link-local one, "[fe80::1%eth0]:443"), without
// server_name, is checked against the certificate's IP addresses with
// the zone dropped, as the engine's DialTLS and crypto/tls's Dial do, and
// sent no SNI: a certificate for fe80::1 passes a handshake with the
// pool's config (over loopback).
func TestUpstreamTLSZonedIPChecked(t *testing.T) {
	ca := newTestCA(t)
	leaf, err := ca.Issue(certgen.Spec{
		CommonName:  "link-local",
		IPAddresses: []net.IP{net.ParseIP("fe80::1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(`listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: http}]
pools:
  - {name: app, servers: ["[fe80::1%eth0]:443"], tls: {ca_file: ` + caFile(t, ca, "ca.pem") + `}}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfgs, err := cfg.Pools[0].clientConfigs()
	if err != nil {
		t.Fatal(err)
	}
	sni := make(chan string, 1)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{leaf.TLS()},
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			sni <- hi.ServerName
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if c, err := ln.Accept(); err == nil {
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	defer func() { <-done }()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if err := tls.Client(cc, cfgs[0]).Handshake(); err != nil {
		t.Fatalf("handshake with the certificate for fe80::1: %v", err)
	}
	if s := <-sni; s != "" {
		t.Errorf("SNI %q, want none for an IP address", s)
	}
}
