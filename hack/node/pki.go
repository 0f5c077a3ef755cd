package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// authority is the node's one CA: it signs every serving and client
// certificate (the API server's, the kubelet's, each component's).
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120)) }

func writePEM(path, typ string, der []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func newAuthority(dir string) (*authority, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "linkforge-node-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, "ca.crt"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key}, writeKey(filepath.Join(dir, "ca.key"), key)
}

// certSpec is one certificate the CA issues.
type certSpec struct {
	file   string // <dir>/<file>.crt and .key
	cn     string
	orgs   []string
	server bool
	client bool
	ips    []net.IP
	dns    []string
}

func (a *authority) issue(dir string, s certSpec) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	sn, err := serial()
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: s.cn, Organization: s.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		IPAddresses:  s.ips,
		DNSNames:     s.dns,
	}
	if s.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if s.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, s.file+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, s.file+".key"), key)
}

// clients are the identities that get a kubeconfig: file name, CN, groups.
func (c *config) clients() []certSpec {
	return []certSpec{
		{file: "admin", cn: "linkforge-node-admin", orgs: []string{"system:masters"}},
		{file: "controller-manager", cn: "system:kube-controller-manager"},
		{file: "scheduler", cn: "system:kube-scheduler"},
		{file: kubelet, cn: "system:node:" + c.name, orgs: []string{"system:nodes"}},
		{file: "proxy", cn: "system:kube-proxy"},
	}
}

// writePKI writes the CA, the serving and client certificates, the service
// account signing key and a kubeconfig for each client.
func writePKI(c *config) error {
	dir := c.pki("")
	a, err := newAuthority(dir)
	if err != nil {
		return err
	}
	nodeIP := net.ParseIP(c.nodeIP().String())
	specs := []certSpec{
		{file: "apiserver", cn: apiserver, server: true,
			ips: []net.IP{nodeIP, net.ParseIP(c.apiServiceIP().String()), net.IPv4(127, 0, 0, 1)},
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}},
		{file: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		{file: "kubelet-serving", cn: c.name, server: true, ips: []net.IP{nodeIP}, dns: []string{c.name}},
	}
	for _, s := range c.clients() {
		s.client = true
		specs = append(specs, s)
	}
	for _, s := range specs {
		if err := a.issue(dir, s); err != nil {
			return fmt.Errorf("certificate %s: %w", s.file, err)
		}
	}
	sa, err := newKey()
	if err != nil {
		return err
	}
	if err := writeKey(c.pki("sa.key"), sa); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(c.pki("sa.pub"), "PUBLIC KEY", pub); err != nil {
		return err
	}
	for _, s := range c.clients() {
		if err := writeKubeconfig(c, s.file); err != nil {
			return err
		}
	}
	return nil
}

func writeKubeconfig(c *config, user string) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: linkforge-node
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: linkforge-node
  context:
    cluster: linkforge-node
    user: %s
current-context: linkforge-node
`, c.server(), c.pki("ca.crt"), user, c.pki(user+".crt"), c.pki(user+".key"), user)
	path := c.kubeconfig(user)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(kc), 0o600)
}
