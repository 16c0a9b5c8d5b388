package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/engine/sigmanifest"
	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// This file evaluates validate.manifests: the resource must carry a
// signature of the YAML manifest it was made from (sigmanifest), by the
// rule's attestors, and equal that manifest but for the fields ignored,
// as Kyverno's manifest verification (k8s-manifest-sigstore) decides.
// Verdict compares the resource with the manifest directly; Kyverno can
// also compare it with a dry-run creation of the manifest (dryRun), which
// passes resources the API server changed on creation: here they fail
// unless their changed fields are ignored.

// manifestDefaultIgnores are the fields of an object that may differ from
// its signed manifest without an ignoreFields entry: those the API server
// and controllers set or default (k8s-manifest-sigstore's defaults and
// Kyverno's), by kind ("" for every kind).
var manifestDefaultIgnores = []struct {
	kind   string
	fields []string
}{
	{"", []string{
		"metadata.namespace", "metadata.managedFields", "metadata.resourceVersion", "metadata.selfLink",
		"metadata.annotations.kubectl.kubernetes.io/last-applied-configuration", "metadata.annotations.namespace",
		"metadata.annotations.control-plane.alpha.kubernetes.io/leader", "metadata.annotations.deployment.kubernetes.io/revision",
		"metadata.annotations.deprecated.daemonset.template.generation", "metadata.creationTimestamp", "metadata.generation",
		"metadata.uid", "metadata.finalizers", "metadata.labels.app.kubernetes.io/instance", "status",
		"spec.containers.*.imagePullPolicy", "spec.containers.*.terminationMessagePath", "spec.containers.*.terminationMessagePolicy",
		"spec.dnsPolicy", "spec.restartPolicy", "spec.schedulerName", "spec.terminationGracePeriodSeconds",
	}},
	{"ServiceAccount", []string{"secrets.*.name", "imagePullSecrets.*.name"}},
	{"Service", []string{"spec.ports.*.nodePort", "spec.clusterIP", "spec.clusterIPs.0", "spec.sessionAffinity", "spec.type",
		"spec.ipFamilies.*", "spec.ipFamilyPolicy", "spec.internalTrafficPolicy"}},
	{"Pod", []string{"spec.volumes.*.name", "spec.volumes.*.projected.*", "spec.volumes.*.configMap.defaultMode", "spec.containers.*.volumeMounts.*",
		"spec.tolerations.*", "spec.enableServiceLinks", "spec.preemptionPolicy", "spec.priority", "spec.serviceAccount"}},
	{"Deployment", []string{"spec.progressDeadlineSeconds", "spec.revisionHistoryLimit", "spec.strategy.*", "spec.template.metadata.creationTimestamp",
		"spec.containers.*.ports.*.protocol", "spec.containers.*.resources", "spec.securityContext"}},
	{"CustomResourceDefinition", []string{"spec.conversion.strategy", "spec.names.listKind"}},
	{"ClusterPolicy", []string{"metadata.annotations.pod-policies.kyverno.io/autogen-controllers", "spec.failurePolicy", "spec.background", "spec.validationFailureAction"}},
	{"Policy", []string{"metadata.annotations.pod-policies.kyverno.io/autogen-controllers", "spec.failurePolicy", "spec.background", "spec.validationFailureAction"}},
}

// validateManifests evaluates a validate.manifests rule on the resource.
func (run *ruleRun) validateManifests(rr RuleResponse, m *policy.Manifests) RuleResponse {
	if run.req.Operation == OpDelete {
		rr.Status = statusNone
		return rr
	}
	if run.req.DryRun {
		// As Kyverno: nothing is stored.
		rr.Status, rr.Message = StatusPass, "allowed because of DryRun request"
		return rr
	}
	obj := run.obj
	annotations := document.StringMap(obj, "metadata", "annotations")
	domain := m.AnnotationDomain
	if domain == "" {
		domain = sigmanifest.DefaultDomain
	}
	if m.Repository != "" || annotations[sigmanifest.Annotation(domain, "resourceBundleRef", 0)] != "" {
		rr.Status, rr.Unsupported = StatusError, true
		rr.Message = "validate.manifests: manifests signed in an OCI image (repository, resourceBundleRef) are not verified yet"
		return rr
	}
	if err := run.step(int64(len(annotations))); err != nil {
		return run.errorf(rr, "%v", err)
	}
	signed, readErr := sigmanifest.Read(annotations, domain)
	c := manifestCheck{run: run, obj: obj, signed: signed, readErr: readErr, ignore: manifestIgnores(m, obj, domain)}
	var passed []string
	for i := range m.Attestors {
		ok, reason, err := c.set(&m.Attestors[i], fmt.Sprintf(".attestors[%d]", i))
		switch {
		case errors.Is(err, ErrImageVerificationUnsupported):
			rr.Status, rr.Unsupported, rr.Message = StatusError, true, "validate.manifests: "+err.Error()
			return rr
		case err != nil:
			return run.errorf(rr, "error occurred during manifest verification: %v", err)
		case !ok:
			rr.Status, rr.Message = StatusFail, reason
			return rr
		}
		passed = append(passed, reason)
	}
	rr.Status, rr.Message = StatusPass, "verified manifest signatures; "+strings.Join(passed, ",")
	return rr
}

// manifestIgnores are the fields of obj that may differ from its
// manifest: the defaults for its kind, the rule's ignoreFields whose
// objects name it, and the signature's own annotations.
func manifestIgnores(m *policy.Manifests, obj map[string]any, domain string) []string {
	kind := document.String(obj, "kind")
	var out []string
	for _, d := range manifestDefaultIgnores {
		if d.kind == "" || d.kind == kind {
			out = append(out, d.fields...)
		}
	}
	for _, base := range []string{"message", "signature", "certificate", "bundle", "resourceBundleRef"} {
		out = append(out, "metadata.annotations."+domain+"/"+base)
	}
	for _, b := range m.IgnoreFields {
		for _, o := range b.Objects {
			if objectNamed(o, obj) {
				out = append(out, b.Fields...)
				break
			}
		}
	}
	return out
}

// objectNamed reports whether ref names obj: each field it sets matches
// ("*" wildcards).
func objectNamed(ref policy.ObjectReference, obj map[string]any) bool {
	group, version, found := strings.Cut(document.String(obj, "apiVersion"), "/")
	if !found {
		group, version = "", group
	}
	for _, f := range [][2]string{
		{ref.Group, group}, {ref.Version, version}, {ref.Kind, document.String(obj, "kind")},
		{ref.Namespace, document.String(obj, "metadata", "namespace")}, {ref.Name, document.String(obj, "metadata", "name")},
	} {
		if f[0] != "" && !wildcard.Match(f[0], f[1]) {
			return false
		}
	}
	return true
}

// manifestCheck is one resource's manifest verification.
type manifestCheck struct {
	run     *ruleRun
	obj     map[string]any
	signed  *sigmanifest.Signed
	readErr error
	ignore  []string
}

// set checks one attestor set: its entries (keys split one per PEM key)
// until its count is reached, as Kyverno counts them. ok false gives
// the reasons of the entries that failed; an error, that an entry could
// not be checked.
func (c *manifestCheck) set(as *policy.AttestorSet, path string) (bool, string, error) {
	entries, required := as.Expanded()
	var errs []error
	var verified, failed []string
	for i := range entries {
		a := &entries[i]
		at := fmt.Sprintf("%s.entries[%d]", path, i)
		var ok bool
		var reason string
		var err error
		if nested, nerr := a.NestedSet(); nerr != nil {
			err = fmt.Errorf("failed to unmarshal nested attestor %s: %w", at, nerr)
		} else if nested != nil {
			ok, reason, err = c.set(nested, at+".attestor")
		} else {
			ok, reason, err = c.entry(a, at)
		}
		switch {
		case errors.Is(err, ErrImageVerificationUnsupported):
			return false, "", err
		case err != nil:
			errs = append(errs, err)
		case ok:
			verified = append(verified, reason)
		default:
			failed = append(failed, reason)
		}
		if len(verified) >= required {
			return true, fmt.Sprintf("manifest verification succeeded; verifiedCount %d; requiredCount %d; message %s",
				len(verified), required, strings.Join(verified, ",")), nil
		}
	}
	if len(errs) > 0 {
		return false, "", errors.Join(errs...)
	}
	return false, fmt.Sprintf("manifest verification failed; verifiedCount %d; requiredCount %d; message %s",
		len(verified), required, strings.Join(failed, ",")), nil
}

// entry checks one attestor entry: a signature the entry's key verifies,
// of a manifest the resource equals.
func (c *manifestCheck) entry(a *policy.Attestor, path string) (bool, string, error) {
	switch {
	case a.Keys == nil && a.Certificates == nil && a.Keyless == nil:
		return false, "", fmt.Errorf("%s: keys, certificates, keyless, or a nested attestor is required", path)
	case a.Keys == nil:
		return false, "", fmt.Errorf("%w: %s: signed manifests are verified with keys only (not certificates or keyless)", ErrImageVerificationUnsupported, path)
	case a.Keys.PublicKeys == "":
		return false, "", fmt.Errorf("%w: %s.keys: keys from a Secret or a KMS", ErrImageVerificationUnsupported, path)
	}
	path += ".keys"
	for k, want := range a.Annotations {
		if got := document.String(c.obj, "metadata", "annotations", k); got != want {
			return false, fmt.Sprintf("%s: annotation %s is %q, want %q", path, k, got, want), nil
		}
	}
	if c.readErr != nil {
		return false, fmt.Sprintf("%s: %v", path, c.readErr), nil
	}
	alg := a.Keys.SignatureAlgorithm
	if alg == "" {
		alg = a.SignatureAlgorithm
	}
	v, err := sigmanifest.NewVerifier(a.Keys.PublicKeys, alg)
	if err != nil {
		return false, "", fmt.Errorf("%s: %w", path, err)
	}
	signed := false
	for _, sig := range c.signed.Signatures {
		if err := c.run.step(1); err != nil {
			return false, "", err
		}
		if v.Verify(c.signed.Message, sig) {
			signed = true
			break
		}
	}
	if !signed {
		return false, fmt.Sprintf("%s: failed to verify signature: none of the %d signatures verifies with the key", path, len(c.signed.Signatures)), nil
	}
	manifest := sigmanifest.Find(c.signed.Manifests, c.obj)
	if manifest == nil {
		return false, fmt.Sprintf("%s: YAML manifest not found for this resource: the signed message has no %s %s",
			path, document.String(c.obj, "kind"), document.String(c.obj, "metadata", "name")), nil
	}
	if err := c.run.step(int64(len(c.ignore))); err != nil {
		return false, "", err
	}
	if diffs := sigmanifest.Diff(manifest, c.obj, c.ignore); len(diffs) > 0 {
		return false, fmt.Sprintf("%s: failed to verify signature. diff found; %s", path, sigmanifest.String(diffs)), nil
	}
	return true, "signed by a valid signer", nil
}
