package certgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"time"
)

// Spec says what a certificate names and what it may be used for.
type Spec struct {
	// CommonName is the subject's common name.
	CommonName string
	// DNSNames and IPAddresses are the subject alternative names.
	DNSNames    []string
	IPAddresses []net.IP
	// ExtKeyUsage is what the certificate's key may be used for
	// (x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth); none for
	// any use.
	ExtKeyUsage []x509.ExtKeyUsage
}

// Cert is a certificate and its private key. Its methods may be called
// from any goroutine.
type Cert struct {
	// Leaf is the certificate, parsed.
	Leaf *x509.Certificate
	// Key is its private key.
	Key *ecdsa.PrivateKey
}

// A certificate is valid from validFrom before it is made until validFor
// after.
const (
	validFrom = time.Hour
	validFor  = 24 * time.Hour
)

// New returns a self-signed certificate for s. It is a CA: a pool of it
// (Pool) trusts both it and the certificates it issues.
func New(s Spec) (*Cert, error) {
	return create(s, nil)
}

// Issue returns a certificate for s that c signed; c must be a CA (from
// New).
func (c *Cert) Issue(s Spec) (*Cert, error) {
	if !c.Leaf.IsCA {
		return nil, errors.New("certgen: issuing with a certificate that is not a CA")
	}
	return create(s, c)
}

// create makes a certificate for s with a new key, signed by parent, or,
// if parent is nil, self-signed and a CA.
func create(s Spec, parent *Cert) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	// A random 64-bit serial: bench's --tls certificate had one, and its
	// size is in the handshake bytes bench measures.
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: s.CommonName},
		DNSNames:     s.DNSNames,
		IPAddresses:  s.IPAddresses,
		NotBefore:    now.Add(-validFrom),
		NotAfter:     now.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  s.ExtKeyUsage,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.Leaf, parent.Key
	} else {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Cert{Leaf: leaf, Key: key}, nil
}

// Pool returns a pool that trusts c (and, c being a CA, what it issued).
func (c *Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Leaf)
	return p
}

// TLS returns c as a crypto/tls certificate (a chain of c alone).
func (c *Cert) TLS() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.Leaf.Raw}, PrivateKey: c.Key, Leaf: c.Leaf}
}

// CertPEM returns the certificate as a PEM block (CERTIFICATE).
func (c *Cert) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Leaf.Raw})
}

// KeyPEM returns the private key as a PEM block (PRIVATE KEY, PKCS #8).
func (c *Cert) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// WriteFiles writes the certificate (CertPEM) to certFile and its key
// (KeyPEM) to keyFile, replacing them if they exist (a certificate
// renewed); a file it creates is readable by its owner only.
// tls.LoadX509KeyPair reads them.
func (c *Cert) WriteFiles(certFile, keyFile string) error {
	keyPEM, err := c.KeyPEM()
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, c.CertPEM(), 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyFile, keyPEM, 0o600)
}
