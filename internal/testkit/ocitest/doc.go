// Package ocitest is the rig of the image-verification tests: a real
// OCI registry in the test process, and images pushed and signed in the
// test with the ecosystem's own libraries, so that what a test verifies
// is what cosign and notation write.
//
//   - NewRegistry serves go-containerregistry's pkg/registry (the
//     distribution API, in memory, with the OCI 1.1 referrers API) on a
//     loopback port, over plain HTTP or, WithTLS, HTTPS from a test CA.
//     It logs every request (Requests, Count, ManifestFetches,
//     BlobFetches, Fetches, ResetLog), so a test can assert that an
//     image's signature was fetched once; FailWith and FailWhere answer
//     requests with an error status, and Close makes it unreachable.
//     WithBasicAuth makes it private: 401 to a client without the user
//     and password (the registry's own helpers send them).
//   - PushImage, Push and PushIndex put images and a multi-arch index
//     under repo:tag and give their tag, digest and reference by digest;
//     Retag moves a tag.
//   - NewKey makes an ECDSA P-256 key pair (PublicKeyPEM as a policy's
//     publicKeys); Registry.Sign signs an image as `cosign sign --key
//     --tlog-upload=false` does in the classic form (the .sig tag),
//     Registry.Attest attaches an in-toto statement as `cosign attest`
//     does (a DSSE envelope in the .att tag).
//   - NewCA makes a test CA (a root, WithIntermediate an intermediate);
//     CA.Issue gives a short-lived code-signing Certificate for an email
//     or URI identity with the Fulcio issuer extensions, which signs and
//     attests as cosign keyless does (certificate and chain annotations,
//     no Rekor bundle, no SCT): verify it against CA.RootsPEM with the
//     SCT and transparency-log checks off.
//   - Registry.SignNotary signs an image with notation-go as `notation
//     sign` does (a JWS envelope as an OCI 1.1 referrer, or under the
//     referrers tag schema WithoutReferrers), with a Certificate's chain;
//     CA.RootsPEM is then a Notary attestor's certs. NotaryRepository
//     gives notation.Verify the same registry.
//
// Nothing here talks to a public registry, Fulcio or Rekor. Every
// function takes the test's testing.TB, fails it on error and cleans up
// through t.Cleanup.
//
// Not yet here: cosign's sigstore bundle format (cosign sign
// --new-bundle-format, an OCI 1.1 referrer) and RFC 3161 timestamps.
package ocitest
