package webhook

import (
	"crypto/tls"
)

// tlsConfig is the server's TLS configuration: the serving certificate
// from the source and, when clients are verified, a handshake that fails
// without a client certificate signed by the bundle.
func (s *Server) tlsConfig() *tls.Config {
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: s.cert.GetCertificate,
	}
	if s.clientCAs == nil {
		return base
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = s.clientCAs.Pool()
		return cfg, nil
	}
	return base
}
