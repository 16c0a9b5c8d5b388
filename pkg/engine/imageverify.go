package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/imageref"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// This file is the pure half of classic verifyImages rules: the images a
// rule checks, with the JSON pointer of each, the matching of
// imageReferences and skipImageReferences, the mutateDigest patch, and the
// ImageVerifier contract through which a verifier that talks to
// registries is injected (WithImageVerifier). The engine never does I/O
// itself; imageverify_eval.go evaluates the rules through the verifier.

// Image is one image of a resource that a verifyImages rule may check.
type Image struct {
	// Field is the name of the extractor that found it: initContainers,
	// containers or ephemeralContainers for Pods and Pod controllers, a
	// custom extractor's name ("custom" when it has none).
	Field string
	// Name is the extractor's key of the image: the container's name, or
	// the pointer when a custom extractor has no key.
	Name string
	// Image is the image as written in the resource (or as a custom
	// extractor's jmesPath made it).
	Image string
	// Ref is Image parsed; Ref.String() (docker.io/nginx:latest,
	// ghcr.io/org/app@sha256:...) is what imageReferences and
	// skipImageReferences match, and what a verifier verifies.
	Ref imageref.Ref
	// Pointer is the JSON pointer (RFC 6901) of the field holding the
	// image: /spec/containers/0/image, /spec/template/spec/initContainers/1/image.
	Pointer string
	// PullSecrets are the names in the imagePullSecrets met on the way
	// to the image (the Pod spec's), for the verifier's credentials.
	PullSecrets []string
}

// ImageExtractor says where a kind keeps images (Kyverno's
// ImageExtractorConfig, the entries of a rule's imageExtractors).
type ImageExtractor struct {
	// Path is the slash-separated path of the object holding the image, or
	// of the image itself when Value is empty; `*` walks every element of
	// a list or map (/spec/containers/*/image).
	Path string `json:"path"`
	// Value is the image's field in the object Path leads to (default:
	// the last element of Path).
	Value string `json:"value,omitempty"`
	// Name names the images it finds (Image.Field; default "custom").
	Name string `json:"name,omitempty"`
	// Key is the field of the object whose value names each image
	// (Image.Name; default: the image's pointer).
	Key string `json:"key,omitempty"`
	// JMESPath turns the value found into the image reference.
	JMESPath string `json:"jmesPath,omitempty"`
}

// ErrImageExtraction wraps the errors of ResourceImages.
var ErrImageExtraction = errors.New("image extraction")

// extractor is an ImageExtractor with its path split.
type extractor struct {
	fields                 []string
	key, value, name, jmes string
}

func standardExtractors(prefix ...string) []extractor {
	out := make([]extractor, 0, 3)
	for _, field := range []string{"initContainers", "containers", "ephemeralContainers"} {
		fields := append(append(append([]string(nil), prefix...), field), "*")
		out = append(out, extractor{fields: fields, key: "name", value: "image", name: field})
	}
	return out
}

// builtinExtractors are Kyverno's extractors by kind: the Pod spec's
// three container lists, in the Pod, a controller's template, a
// CronJob's job template.
var builtinExtractors = func() map[string][]extractor {
	pod := standardExtractors("spec")
	controller := standardExtractors("spec", "template", "spec")
	return map[string][]extractor{
		"Pod":                   pod,
		"DaemonSet":             controller,
		"Deployment":            controller,
		"ReplicaSet":            controller,
		"ReplicationController": controller,
		"StatefulSet":           controller,
		"Job":                   controller,
		"CronJob":               standardExtractors("spec", "jobTemplate", "spec", "template", "spec"),
	}
}()

// ParseImageExtractors decodes a rule's imageExtractors (policy.Rule keeps
// them as written) by kind.
func ParseImageExtractors(raw map[string][]any) (map[string][]ImageExtractor, error) {
	if raw == nil {
		return nil, nil
	}
	out := make(map[string][]ImageExtractor, len(raw))
	for kind, list := range raw {
		exs := make([]ImageExtractor, 0, len(list))
		for i, v := range list {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%w: imageExtractors.%s[%d]: not an object", ErrImageExtraction, kind, i)
			}
			var ex ImageExtractor
			for k, dst := range map[string]*string{"path": &ex.Path, "value": &ex.Value, "name": &ex.Name, "key": &ex.Key, "jmesPath": &ex.JMESPath} {
				if s, ok := m[k]; ok && s != nil {
					str, ok := s.(string)
					if !ok {
						return nil, fmt.Errorf("%w: imageExtractors.%s[%d].%s: not a string", ErrImageExtraction, kind, i, k)
					}
					*dst = str
				}
			}
			exs = append(exs, ex)
		}
		out[kind] = exs
	}
	return out, nil
}

func extractorsFor(kind string, custom map[string][]ImageExtractor) ([]extractor, error) {
	list, ok := custom[kind]
	if !ok {
		return builtinExtractors[kind], nil
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: no extractors found for %s", ErrImageExtraction, kind)
	}
	out := make([]extractor, 0, len(list))
	for _, c := range list {
		var fields []string
		for _, f := range strings.Split(c.Path, "/") {
			if f = strings.TrimSpace(f); f != "" {
				fields = append(fields, f)
			}
		}
		ex := extractor{key: c.Key, value: c.Value, name: c.Name, jmes: c.JMESPath}
		if ex.name == "" {
			ex.name = "custom"
		}
		if ex.value == "" {
			if len(fields) == 0 {
				return nil, fmt.Errorf("%w: imageExtractors.%s: empty path", ErrImageExtraction, kind)
			}
			ex.value, fields = fields[len(fields)-1], fields[:len(fields)-1]
		}
		ex.fields = fields
		out = append(out, ex)
	}
	return out, nil
}

// ResourceImages lists the images of obj as Kyverno extracts them for
// verifyImages and the images variable: with the rule's custom extractors
// for obj's kind when it has some, otherwise Kyverno's built-in ones
// (Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet,
// ReplicationController, Job: the Pod spec's initContainers, containers
// and ephemeralContainers; CronJob: its job template's). Other kinds have
// no images.
//
// The order is the extractors' (initContainers, containers,
// ephemeralContainers for the built-in ones), then the elements' (a
// list's by index, a map's by key); Kyverno keeps them in Go maps, so its
// order is not fixed. Two images of one extractor with the same key keep
// the later one, at the earlier one's place, as Kyverno's map does. An
// empty or absent image is left out. search evaluates a custom
// extractor's jmesPath on the value found; it may be nil when no
// extractor has one. Errors are Kyverno's: an invalid image, a `*` on a
// value that is neither a list nor a map, a step into a value that is not
// an object, a key that is not a string, a jmesPath that does not give a
// string.
func ResourceImages(obj map[string]any, extractors map[string][]ImageExtractor, search func(expr string, data any) (any, error)) ([]Image, error) {
	kind, _ := obj["kind"].(string)
	exs, err := extractorsFor(kind, extractors)
	if err != nil {
		return nil, err
	}
	var out []Image
	for _, ex := range exs {
		w := imageWalk{ex: ex, search: search, index: map[string]int{}}
		if err := w.walk(obj, nil, ex.fields, nil); err != nil {
			return nil, err
		}
		out = append(out, w.found...)
	}
	return out, nil
}

type imageWalk struct {
	ex     extractor
	search func(string, any) (any, error)
	found  []Image
	index  map[string]int
}

func (w *imageWalk) walk(v any, path, fields, secrets []string) error {
	if v == nil {
		return nil
	}
	if len(fields) > 0 && fields[0] == "*" {
		switch t := v.(type) {
		case []any:
			for i, e := range t {
				if err := w.walk(e, appendPath(path, strconv.Itoa(i)), fields[1:], secrets); err != nil {
					return err
				}
			}
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if err := w.walk(t[k], appendPath(path, k), fields[1:], secrets); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("%w: invalid type", ErrImageExtraction)
		}
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: invalid image config", ErrImageExtraction)
	}
	if list, ok := m["imagePullSecrets"].([]any); ok {
		for _, s := range list {
			if sm, ok := s.(map[string]any); ok && document.String(sm, "name") != "" {
				name := document.String(sm, "name")
				secrets = append(secrets[:len(secrets):len(secrets)], name)
			}
		}
	}
	if len(fields) > 0 {
		return w.walk(m[fields[0]], appendPath(path, fields[0]), fields[1:], secrets)
	}
	return w.found1(m, path, secrets)
}

// found1 records the image of m, the object the extractor's path leads to.
func (w *imageWalk) found1(m map[string]any, path, secrets []string) error {
	pointer := jsonPointer(appendPath(path, w.ex.value))
	key := pointer
	if w.ex.key != "" {
		k, ok := m[w.ex.key].(string)
		if !ok {
			return fmt.Errorf("%w: invalid key", ErrImageExtraction)
		}
		key = k
	}
	value, ok := m[w.ex.value].(string)
	if !ok || strings.TrimSpace(value) == "" {
		return nil
	}
	if w.ex.jmes != "" {
		if w.search == nil {
			return fmt.Errorf("%w: jmespath %s: no interpreter", ErrImageExtraction, w.ex.jmes)
		}
		res, err := w.search(w.ex.jmes, value)
		if err != nil {
			return fmt.Errorf("%w: failed to apply jmespath %s: %w", ErrImageExtraction, w.ex.jmes, err)
		}
		s, ok := res.(string)
		if !ok {
			return fmt.Errorf("%w: jmespath %s must produce a string, but produced %v", ErrImageExtraction, w.ex.jmes, res)
		}
		value = s
	}
	ref, err := imageref.Parse(value, imageref.DefaultRegistry, true)
	if err != nil {
		return fmt.Errorf("%w: invalid image '%s' (%w)", ErrImageExtraction, value, err)
	}
	img := Image{Field: w.ex.name, Name: key, Image: value, Ref: ref, Pointer: pointer, PullSecrets: secrets}
	if i, ok := w.index[key]; ok {
		w.found[i] = img
		return nil
	}
	w.index[key] = len(w.found)
	w.found = append(w.found, img)
	return nil
}

// appendPath appends without sharing the backing array of path.
func appendPath(path []string, elem string) []string {
	return append(path[:len(path):len(path)], elem)
}

// jsonPointer joins path as an RFC 6901 pointer ("~" and "/" escaped;
// Kyverno does not escape them, which only matters for map keys holding
// them).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func jsonPointer(path []string) string {
	var b strings.Builder
	for _, p := range path {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(p))
	}
	return b.String()
}

// MatchImageReferences reports whether one of patterns matches ref, an
// image in Kyverno's normal form (Image.Ref.String()). Patterns are
// wildcard patterns compared with the whole normalised reference, as
// written (not normalised themselves): "nginx" or "nginx:*" never match
// (the reference is docker.io/nginx:...), "docker.io/nginx:*" and
// "*/nginx:*" do; "ghcr.io/org/*" matches every tag and digest of every
// image under ghcr.io/org. A reference by digest has no tag
// (ghcr.io/org/app@sha256:...), so "ghcr.io/org/app:*" does not match it.
func MatchImageReferences(patterns []string, ref string) bool {
	for _, p := range patterns {
		if wildcard.Match(p, ref) {
			return true
		}
	}
	return false
}

// SelectImages splits images into those iv checks and those it skips, in
// order, as Kyverno does: an image is selected when one of iv's
// imageReferences (after Converted: the deprecated image too) matches it;
// a selected image that one of skipImageReferences matches is skipped
// (Kyverno answers it with a skip, ImageSkipMessage, and records it as
// skipped in its verification annotation). Images neither list selects
// are in neither result.
func SelectImages(iv *policy.ImageVerification, images []Image) (checked, skipped []Image) {
	c := iv.Converted()
	for _, img := range images {
		ref := img.Ref.String()
		switch {
		case !MatchImageReferences(c.ImageReferences, ref):
		case MatchImageReferences(c.SkipImageReferences, ref):
			skipped = append(skipped, img)
		default:
			checked = append(checked, img)
		}
	}
	return checked, skipped
}

// ImageSkipMessage is Kyverno's message for an image that
// skipImageReferences skips.
func ImageSkipMessage(ref, policyName, rule string) string {
	return fmt.Sprintf("skipping image reference image %s, policy %s ruleName %s", ref, policyName, rule)
}

// DigestPatch is the JSON patch operation (RFC 6902) with which
// mutateDigest pins img to digest, as Kyverno writes it: replace the
// image field at img.Pointer with the normalised reference and the
// digest (nginx becomes docker.io/nginx:latest@sha256:...). ok is false
// when img already names a digest: Kyverno leaves such an image as it
// is.
func DigestPatch(img Image, digest string) (op map[string]any, ok bool) {
	if img.Ref.Digest != "" {
		return nil, false
	}
	return map[string]any{"op": "replace", "path": img.Pointer, "value": img.Ref.String() + "@" + digest}, true
}

// Kyverno's messages of the validation half of verifyImages (the
// validating webhook, after the mutating one verified and pinned the
// images).
const (
	// MsgMissingDigest is the failure of verifyDigest for an image that
	// names no digest (with its normalised reference).
	MsgMissingDigest = "missing digest for %s"
	// MsgUnverifiedImage is the failure of required for an image no
	// verification passed (with its normalised reference).
	MsgUnverifiedImage = "unverified image %s"
)

// ImageVerifier verifies image signatures and attestations against
// registries: the I/O half of verifyImages, which the engine does not do
// itself. WithImageVerifier gives one to an Engine; the engine then
// calls it once per image a verifyImages entry checks (SelectImages), in
// the order of ResourceImages, and builds the rule's responses, the
// mutateDigest patches (DigestPatch) and the verification records from
// the results.
//
// Implementations must be safe for concurrent use, honour ctx (the
// admission request's deadline: return ctx.Err(), wrapped, once it ends),
// and never put credentials in errors or messages. They may cache
// results (req.Verification.UsesCache() says whether the policy allows
// it); a cache key must cover the image digest, the policy and its
// version, the rule and the entry (req.Policy, req.PolicyVersion,
// req.Rule, req.Index).
type ImageVerifier interface {
	// Verify checks req.Image against the entry's attestors (every set:
	// RequiredCount of its entries, keys split one per PEM key as
	// Kyverno does, nested sets recursively) and then its attestations
	// (each statement of each type present, signed by the attestation's
	// attestors, or by any signature when it names none).
	//
	// It returns an error only when it could not reach a verdict (a
	// registry unreachable, a deadline reached): the engine answers it
	// with a rule error, as Kyverno answers a network error, so that
	// failurePolicy decides. A signature or attestation that is missing
	// or does not verify is not an error: Verify returns a result with
	// Verified false and Kyverno's message in Message.
	Verify(ctx context.Context, req ImageVerifyRequest) (ImageVerifyResult, error)
	// ResolveDigest returns the digest (sha256:...) of req.Image's tag,
	// for mutateDigest on an image the entry did not verify (an entry
	// without attestors, a skipped image). Its errors are those of Verify
	// that reach no verdict.
	ResolveDigest(ctx context.Context, req ImageVerifyRequest) (string, error)
}

// ImageVerifyRequest is what a verifier needs to verify one image for one
// verifyImages entry.
type ImageVerifyRequest struct {
	// Image is the image, as the resource names it, with its pointer and
	// the imagePullSecrets of its Pod spec.
	Image Image
	// Verification is the entry, converted (policy.ImageVerification
	// Converted: no deprecated field is set) and with the rule's
	// variables substituted, except in the attestations' conditions and
	// validate.deny, which the engine evaluates on the statements the
	// result returns. It carries the type (Cosign, SigstoreBundle,
	// Notary), attestors, attestations, repository, annotations,
	// cosignOCI11, imageRegistryCredentials and useCache.
	Verification *policy.ImageVerification
	// Namespace is the resource's namespace: where the Secrets of
	// Image.PullSecrets are, and a namespaced policy's namespace.
	Namespace string
	// PolicyNamespace is a namespaced policy's namespace (empty for a
	// cluster policy): where a tenant's imageRegistryCredentials are.
	PolicyNamespace string
	// Policy is the policy's key (name, or namespace/name), and
	// PolicyVersion the version of its spec (uid and generation: a write
	// of its status does not change it), for cache keys and messages.
	Policy, PolicyVersion string
	// Rule is the rule's name, Index the entry's index in its
	// verifyImages.
	Rule  string
	Index int
	// CheckStatement evaluates the conditions of Verification.
	// Attestations[attestation] on one verified statement of its type,
	// with the statement's predicate merged into the rule's context and
	// under the attestation's name, as Kyverno does. ok is false with the
	// first failed condition's message; err when a condition could not be
	// evaluated. Nil when no attestation has conditions.
	CheckStatement func(attestation int, statement map[string]any) (ok bool, message string, err error)
}

// Cacheable reports whether the outcome of req depends on the image and
// the entry alone, so that a verifier may keep it: an entry whose
// attestations have conditions, or that has validate.deny, is checked
// against each request's context and is verified each time.
func (req *ImageVerifyRequest) Cacheable() bool {
	iv := req.Verification
	if iv == nil || !iv.UsesCache() {
		return false
	}
	if iv.Validation != nil && iv.Validation.Deny != nil {
		return false
	}
	for i := range iv.Attestations {
		if len(iv.Attestations[i].Conditions) > 0 {
			return false
		}
	}
	return true
}

// ImageVerifyResult is the outcome of verifying one image.
type ImageVerifyResult struct {
	// Verified is true when every attestor set and every attestation was
	// satisfied (before the engine checks the attestations' conditions).
	Verified bool
	// Digest is the image's digest as the registry resolved it
	// (sha256:...), for mutateDigest; empty when the verifier did not
	// resolve it.
	Digest string
	// Statements are the verified in-toto statements by attestation:
	// Statements[i] holds those of Verification.Attestations[i] of its
	// type, from the attestor entry that satisfied it, each decoded from
	// JSON (with its "type" and "predicate"). The engine puts the first
	// one's predicate under the attestation's name for validate.deny.
	Statements [][]map[string]any
	// Message is Kyverno's message: on success "verified image
	// signatures for <image>" or "verified image attestations for
	// <image>"; on failure the reason, as Kyverno's verifier words it
	// ("failed to verify image <image>: .attestors[0].entries[0].keys:
	// no matching signatures", "image attestations verification failed,
	// verifiedCount: 0, requiredCount: 1, error: ...").
	Message string
	// Cached is true when the result came from a cache (Kyverno's
	// message is then "verified from cache").
	Cached bool
}

// WithImageVerifier sets the verifier of verifyImages rules. Without one,
// a verifyImages rule that needs a registry (attestors, attestations, a
// digest to resolve) is an error marked Unsupported; verifyDigest and
// required alone are checked without one.
func WithImageVerifier(v ImageVerifier) Option {
	return func(e *Engine) error {
		if v == nil {
			return fmt.Errorf("%w: nil image verifier", ErrInvalidOption)
		}
		e.imageVerifier = v
		return nil
	}
}
