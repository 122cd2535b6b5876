package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// caPool trusts only the given CA, not the system roots: the gateway's
// certificate is self-managed, and a benchmark that accepted any certificate
// would not notice talking to the wrong server.
func caPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--ca: %v (pass the gateway's CA, e.g. <tls-dir>/ca.crt)", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca %s holds no PEM certificate", path)
	}
	return pool, nil
}

type grpcTarget struct {
	address, ca, serverName string
	plaintext               bool
}

func (t *grpcTarget) register(fs *flag.FlagSet) {
	fs.StringVar(&t.address, "address", "", "gateway gRPC host:port")
	fs.StringVar(&t.ca, "ca", "", "PEM CA to trust (only this one)")
	fs.StringVar(&t.serverName, "server-name", "localhost", "TLS server name to verify")
	fs.BoolVar(&t.plaintext, "plaintext", false, "no TLS (local gateways in plaintext mode)")
}

// dialOptions: the transport credentials for the target, and the target
// string. passthrough skips grpc's DNS resolver: one per connection is a
// goroutine and a lookup per agent that deployed agents with a fixed gateway
// address do not need either.
func (t *grpcTarget) dialOptions() (string, grpc.DialOption, error) {
	if t.address == "" {
		return "", nil, fmt.Errorf("--address host:port is required")
	}
	target := t.address
	if !strings.Contains(target, "://") {
		target = "passthrough:///" + target
	}
	if t.plaintext {
		return target, grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	if t.ca == "" {
		return "", nil, fmt.Errorf("--ca is required for TLS (or pass --plaintext for a plaintext gateway)")
	}
	pool, err := caPool(t.ca)
	if err != nil {
		return "", nil, err
	}
	// X25519 first, without Go's default hybrid post-quantum share: the
	// agents are Node processes whose OpenSSL offers X25519, and a 1.2 KB
	// ML-KEM key share per handshake would add client work they do not do.
	cfg := &tls.Config{RootCAs: pool, ServerName: t.serverName, MinVersion: tls.VersionTLS12,
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256}}
	return target, grpc.WithTransportCredentials(credentials.NewTLS(cfg)), nil
}
