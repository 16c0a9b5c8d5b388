package policy

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestVerifyImagesValidation holds verifyImages entries to Kyverno's
// validation: each case is one entry of an Enforce policy unless it says
// otherwise, and errs are the exact problems (path: message), none for a
// valid entry.
func TestVerifyImagesValidation(t *testing.T) {
	tests := map[string]struct {
		action string
		entry  string
		errs   []string
	}{
		"valid key":                      {entry: `{imageReferences: ["ghcr.io/*"], attestors: [{entries: [{keys: {publicKeys: "k"}}]}]}`},
		"valid deprecated image and key": {entry: `{image: "ghcr.io/*", key: "k"}`},
		"audit with mutateDigest by default": {action: "Audit", entry: `{imageReferences: ["*"]}`,
			errs: []string{"spec.rules[0].verifyImages[0].mutateDigest: mutateDigest must be set to false for ‘Audit’ failure action"}},
		"no action is audit": {action: "-", entry: `{imageReferences: ["*"], mutateDigest: true}`,
			errs: []string{"mutateDigest: mutateDigest must be set to false for ‘Audit’ failure action"}},
		"audit without mutateDigest": {action: "Audit", entry: `{imageReferences: ["*"], mutateDigest: false}`},
		"entry's action overrides":   {action: "Audit", entry: `{failureAction: Enforce, imageReferences: ["*"]}`},
		"entry's audit overrides": {entry: `{failureAction: Audit, imageReferences: ["*"]}`,
			errs: []string{"mutateDigest must be set to false"}},
		"no image reference": {entry: `{attestors: [{entries: [{keys: {publicKeys: "k"}}]}]}`,
			errs: []string{"spec.rules[0].verifyImages[0]: An image reference is required"}},
		"count over entries": {entry: `{imageReferences: ["*"], attestors: [{count: 2, entries: [{keys: {publicKeys: "k"}}]}]}`,
			errs: []string{"spec.rules[0].verifyImages[0].attestors[0]: Count cannot exceed length of entries"}},
		"no entry": {entry: `{imageReferences: ["*"], attestors: [{}]}`,
			errs: []string{"spec.rules[0].verifyImages[0].attestors[0]: An entry is required"}},
		"empty attestor": {entry: `{imageReferences: ["*"], attestors: [{entries: [{}]}]}`,
			errs: []string{"spec.rules[0].verifyImages[0].attestors[0].entries[0]: keys, certificates, keyless, or a nested attestor is required"}},
		"two kinds of attestor": {entry: `{imageReferences: ["*"], attestors: [{entries: [{keys: {publicKeys: k}, certificates: {cert: c}}]}]}`,
			errs: []string{"entries[0]: keys, certificates, keyless, or a nested attestor is required"}},
		"key without key": {entry: `{imageReferences: ["*"], attestors: [{entries: [{keys: {rekor: {url: u}}}]}]}`,
			errs: []string{"entries[0].keys: A public key, kms key or secret is required"}},
		"kms key":    {entry: `{imageReferences: ["*"], attestors: [{entries: [{keys: {kms: "awskms:///k"}}]}]}`},
		"secret key": {entry: `{imageReferences: ["*"], attestors: [{entries: [{keys: {secret: {name: s, namespace: n}}}]}]}`},
		"bad signature algorithm": {entry: `{imageReferences: ["*"], attestors: [{entries: [{keys: {publicKeys: k, signatureAlgorithm: md5}}]}]}`,
			errs: []string{"entries[0].keys: Invalid signature algorithm provided"}},
		"good signature algorithm": {entry: `{imageReferences: ["*"], attestors: [{entries: [{keys: {publicKeys: k, signatureAlgorithm: sha512}}]}]}`},
		"certificates without cert": {entry: `{imageReferences: ["*"], attestors: [{entries: [{certificates: {rekor: {url: u}}}]}]}`,
			errs: []string{"entries[0].certificates: cert or certChain required"}},
		"certificate chain only": {entry: `{imageReferences: ["*"], attestors: [{entries: [{certificates: {certChain: c}}]}]}`},
		"keyless without rekor or roots": {entry: `{imageReferences: ["*"], attestors: [{entries: [{keyless: {issuer: i, subject: s}}]}]}`,
			errs: []string{"entries[0].keyless: Either Rekor URL or roots are required"}},
		"keyless rekor without url": {entry: `{imageReferences: ["*"], attestors: [{entries: [{keyless: {rekor: {ignoreTlog: true}}}]}]}`,
			errs: []string{"entries[0].keyless: An URL is required"}},
		"keyless with roots": {entry: `{imageReferences: ["*"], attestors: [{entries: [{keyless: {roots: r, ctlog: {ignoreSCT: true}, rekor: {url: u, ignoreTlog: true}}}]}]}`},
		"deprecated issuer without roots": {entry: `{image: "*", issuer: i, subject: s}`,
			errs: []string{"spec.rules[0].verifyImages[0].attestors[0].entries[0].keyless: Either Rekor URL or roots are required"}},
		"nested attestor": {entry: `{imageReferences: ["*"], attestors: [{entries: [{attestor: {entries: [{keys: {publicKeys: k}}, {}]}}]}]}`,
			errs: []string{"entries[0].attestor.entries[1]: keys, certificates, keyless, or a nested attestor is required"}},
		"nested attestor not a set": {entry: `{imageReferences: ["*"], attestors: [{entries: [{attestor: [1]}]}]}`,
			errs: []string{"entries[0].attestor: failed to unmarshal attestor set [1]"}},
		"attestation attestors": {entry: `{imageReferences: ["*"], attestations: [{type: t, attestors: [{count: 3, entries: [{keys: {publicKeys: k}}]}]}]}`,
			errs: []string{"attestations[0].attestors[0]: Count cannot exceed length of entries"}},
		"attestation condition operator": {entry: `{imageReferences: ["*"], attestations: [{type: t, conditions: [{all: [{key: a, operator: Equalz, value: b}]}]}]}`,
			errs: []string{`attestations[0].conditions[0].all[0].operator: unknown operator "Equalz"`}},
		"notary with keys": {entry: `{type: Notary, imageReferences: ["*"], attestors: [{entries: [{keys: {publicKeys: k}}]}]}`,
			errs: []string{"spec.rules[0].verifyImages[0].attestors: Keys field is not allowed for type notary"}},
		"notary with keyless": {entry: `{type: Notary, imageReferences: ["*"], attestors: [{entries: [{keyless: {roots: r}}]}]}`,
			errs: []string{"spec.rules[0].verifyImages[0].attestors: Keyless field is not allowed for type notary"}},
		"notary with certificates": {entry: `{type: Notary, imageReferences: ["*"], attestors: [{entries: [{certificates: {cert: c}}]}]}`},
		"bad type": {entry: `{type: GPG, imageReferences: ["*"]}`,
			errs: []string{`verifyImages[0].type: must be Cosign, SigstoreBundle or Notary, not "GPG"`}},
		"variables in image references": {entry: `{imageReferences: ["{{ x }}"]}`,
			errs: []string{`verifyImages[0].imageReferences: rule "r" should not have variables in image reference section`}},
		"unknown field": {entry: `{imageReferences: ["*"], mutateDigets: false}`,
			errs: []string{`unknown field "mutateDigets"`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			action := "Enforce"
			switch tc.action {
			case "-":
				action = ""
			case "":
			default:
				action = tc.action
			}
			doc := "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: p}\nspec:\n"
			if action != "" {
				doc += "  validationFailureAction: " + action + "\n"
			}
			doc += "  rules:\n  - name: r\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    verifyImages: [" + tc.entry + "]\n"
			assertParse(t, doc, tc.errs)
		})
	}
}

func TestImageVerificationConverted(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"current form is kept": {
			in:   `{"imageReferences":["a"],"attestors":[{"entries":[{"keys":{"publicKeys":"k"}}]}]}`,
			want: `{"imageReferences":["a"],"attestors":[{"entries":[{"keys":{"publicKeys":"k"}}]}]}`},
		"image and key": {
			in:   `{"image":"b","imageReferences":["a"],"key":"k","annotations":{"x":"y"}}`,
			want: `{"imageReferences":["a","b"],"attestors":[{"entries":[{"keys":{"publicKeys":"k"},"annotations":{"x":"y"}}]}],"annotations":{"x":"y"}}`},
		"issuer, subject, roots": {
			in:   `{"image":"a","issuer":"i","subject":"s","roots":"r"}`,
			want: `{"imageReferences":["a"],"attestors":[{"entries":[{"keyless":{"issuer":"i","subject":"s","roots":"r"}}]}]}`},
		"key goes to the attestations": {
			in:   `{"image":"a","key":"k","attestations":[{"type":"t"}]}`,
			want: `{"imageReferences":["a"],"attestations":[{"type":"t","attestors":[{"entries":[{"keys":{"publicKeys":"k"}}]}]}]}`},
		"image only, roots dropped": {
			in:   `{"image":"a","roots":"r"}`,
			want: `{"imageReferences":["a"]}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var iv ImageVerification
			if err := json.Unmarshal([]byte(tc.in), &iv); err != nil {
				t.Fatal(err)
			}
			before, _ := json.Marshal(iv)
			c := iv.Converted()
			got, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("Converted:\n got %s\nwant %s", got, tc.want)
			}
			if again, _ := json.Marshal(c.Converted()); string(again) != tc.want {
				t.Errorf("converting twice: %s", again)
			}
			if after, _ := json.Marshal(iv); string(after) != string(before) {
				t.Errorf("Converted changed its receiver: %s", after)
			}
		})
	}
}

// TestImageVerificationRoundTrip checks that an entry prints back as
// written: absent switches stay absent, false ones false, and the nested
// attestor keeps its text.
func TestImageVerificationRoundTrip(t *testing.T) {
	in := `{"failureAction":"Enforce","type":"Notary","imageReferences":["ghcr.io/*"],"skipImageReferences":["ghcr.io/x/*"],` +
		`"attestors":[{"count":1,"entries":[{"certificates":{"cert":"c","certChain":"cc","rekor":{"url":"u","pubkey":"p","ignoreTlog":true},"ctlog":{"ignoreSCT":true,"pubkey":"q","tsaCertChain":"t"}}},` +
		`{"attestor":{"entries":[{"keyless":{"issuer":"i","subject":"s","roots":"r"}}]}}]}],` +
		`"attestations":[{"name":"n","type":"https://slsa.dev/provenance/v1","conditions":[{"all":[{"key":"{{ a }}","operator":"Equals","value":"b"}]}]}],` +
		`"repository":"ghcr.io/sigs","cosignOCI11":true,"mutateDigest":false,"validate":{"message":"m","deny":{"conditions":{"any":[{"key":"a","operator":"Equals","value":"b"}]}}},` +
		`"imageRegistryCredentials":{"allowInsecureRegistry":true,"providers":["github"],"secrets":["s"]}}`
	var iv ImageVerification
	if err := json.Unmarshal([]byte(in), &iv); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(iv)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("round trip:\n got %s\nwant %s", out, in)
	}
	if iv.MutatesDigest() || !iv.VerifiesDigest() || !iv.IsRequired() || !iv.UsesCache() {
		t.Errorf("switches: mutate %v verify %v required %v cache %v", iv.MutatesDigest(), iv.VerifiesDigest(), iv.IsRequired(), iv.UsesCache())
	}
	nested, err := iv.Attestors[0].Entries[1].NestedSet()
	if err != nil || nested == nil || nested.Entries[0].Keyless.Issuer != "i" {
		t.Errorf("nested set %+v, %v", nested, err)
	}
	if got := iv.Attestors[0].RequiredCount(); got != 1 {
		t.Errorf("RequiredCount %d", got)
	}
	if got := (&AttestorSet{Entries: make([]Attestor, 3)}).RequiredCount(); got != 3 {
		t.Errorf("RequiredCount without count %d", got)
	}
	if got := (&Attestation{PredicateType: "p"}).StatementType(); got != "p" {
		t.Errorf("StatementType %q", got)
	}
	if got := (&ImageVerification{}).VerificationType(); got != ImageVerifyCosign {
		t.Errorf("VerificationType %q", got)
	}
	if !reflect.DeepEqual(iv.ImageRegistryCredentials.Providers, []string{"github"}) {
		t.Errorf("providers %v", iv.ImageRegistryCredentials.Providers)
	}
}
