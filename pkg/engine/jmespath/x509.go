package jmespath

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
)

// x509PublicKey is how an RSA public key appears in x509_decode's output:
// the modulus as a decimal string and the exponent as a number.
type x509PublicKey struct {
	N string
	E int
}

// x509_decode(pem string) object: the fields of a PEM-encoded certificate
// ("CERTIFICATE") or certificate signing request ("CERTIFICATE REQUEST"),
// named as in Go's crypto/x509 structs, with byte fields in base64, times in
// RFC 3339 and the public key as {"N": modulus, "E": exponent}. As in
// Kyverno, only RSA keys are supported.
func jpX509Decode(a []any) (any, error) {
	const name = "x509_decode"
	s, err := stringArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return nil, fnErrorf(name, "failed to decode PEM block")
	}
	switch block.Type {
	case "CERTIFICATE":
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fnWrap(name, err)
		}
		key, err := rsaKey(name, cert.PublicKeyAlgorithm, cert.PublicKey)
		if err != nil {
			return nil, err
		}
		cert.PublicKey = key
		return toJSONObject(name, cert)
	case "CERTIFICATE REQUEST":
		csr, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return nil, fnWrap(name, err)
		}
		key, err := rsaKey(name, csr.PublicKeyAlgorithm, csr.PublicKey)
		if err != nil {
			return nil, err
		}
		csr.PublicKey = key
		return toJSONObject(name, csr)
	default:
		return nil, fnErrorf(name, "PEM block is %q, neither a CERTIFICATE nor a CERTIFICATE REQUEST", block.Type)
	}
}

func rsaKey(name string, alg x509.PublicKeyAlgorithm, key any) (x509PublicKey, error) {
	pub, ok := key.(*rsa.PublicKey)
	if alg != x509.RSA || !ok || pub.N == nil {
		return x509PublicKey{}, fnErrorf(name, "certificate should use the RSA algorithm, got %s", alg)
	}
	return x509PublicKey{N: pub.N.String(), E: pub.E}, nil
}

// toJSONObject converts v to the engine's JSON-compatible representation.
func toJSONObject(name string, v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fnWrap(name, err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fnWrap(name, err)
	}
	return out, nil
}
