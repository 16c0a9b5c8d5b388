// Package admissiontraffic is the admission traffic of Verdict's load
// runs: the Pods of a workload file (the fixed workload,
// ../shared/bench/pods-1000.yaml) as the AdmissionReviews the API server
// sends a validating webhook, each with uids of its own, and sent to a
// webhook over HTTPS. cmd/loadgen and the admission-to-report benchmark
// (internal/reports/app) send the same traffic through it. It imports
// no testing package: loadgen is a command.
package admissiontraffic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// ReadPods reads the objects of a multi-document YAML file of Pods. A
// file with none is an error.
func ReadPods(path string) ([]map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs, err := document.DecodeAll(data)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, errors.New("no documents in " + path)
	}
	pods := make([]map[string]any, len(docs))
	for i, d := range docs {
		pods[i] = d.Object
	}
	return pods, nil
}

// Request is what a review says about the request, besides the Pod.
type Request struct {
	// UID is the request's uid.
	UID string
	// Operation is CREATE, UPDATE, DELETE or CONNECT.
	Operation string
	// Username is the requester, a member of system:authenticated.
	Username string
}

// Review is the body of the AdmissionReview (admission.k8s.io/v1) the API
// server sends a webhook about pod: the request names the Pod's name and
// namespace (default when it has none), and the object is pod as it is
// (its metadata.uid included: the webhook publishes no results for an
// object without one).
func Review(pod map[string]any, r Request) ([]byte, error) {
	ns := document.String(pod, "metadata", "namespace")
	if ns == "" {
		ns = "default"
	}
	return json.Marshal(map[string]any{
		"apiVersion": "admission.k8s.io/v1",
		"kind":       "AdmissionReview",
		"request": map[string]any{
			"uid":       r.UID,
			"kind":      map[string]any{"group": "", "version": "v1", "kind": "Pod"},
			"resource":  map[string]any{"group": "", "version": "v1", "resource": "pods"},
			"name":      document.String(pod, "metadata", "name"),
			"namespace": ns,
			"operation": r.Operation,
			"userInfo":  map[string]any{"username": r.Username, "groups": []any{"system:authenticated"}},
			"object":    pod,
			"dryRun":    false,
		},
	})
}

// Placeholders of the uids every review of a Template gets its own of
// (WithUIDs fills them in): the request's and the object's, 36
// characters as a UUID.
const (
	requestUIDMark = "loadgen-request-uid-0000000000000000"
	objectUIDMark  = "loadgen-object-uid-00000000000000000"
)

// Template is the review of one Pod, built once, with where its uids
// are: WithUIDs makes each request's body without encoding it again, as
// a load generator must.
type Template struct {
	body             []byte
	requestAt, uidAt int
}

// ReadTemplates reads the Pods of a multi-document YAML file (ReadPods)
// and makes the Template of each.
func ReadTemplates(path, operation, username string) ([]Template, error) {
	pods, err := ReadPods(path)
	if err != nil {
		return nil, err
	}
	out := make([]Template, len(pods))
	for i, pod := range pods {
		md, ok := pod["metadata"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("document %d of %s has no metadata", i+1, path)
		}
		md["uid"] = objectUIDMark
		b, err := Review(pod, Request{UID: requestUIDMark, Operation: operation, Username: username})
		if err != nil {
			return nil, err
		}
		t := Template{body: b, requestAt: bytes.Index(b, []byte(requestUIDMark)), uidAt: bytes.Index(b, []byte(objectUIDMark))}
		if t.requestAt < 0 || t.uidAt < 0 || bytes.Count(b, []byte(requestUIDMark))+bytes.Count(b, []byte(objectUIDMark)) != 2 {
			return nil, fmt.Errorf("document %d of %s: its uids cannot be placed", i+1, path)
		}
		out[i] = t
	}
	return out, nil
}

// WithUIDs is the review with uids made from n: unique for each n, as
// the API server gives every request and every created object its own.
func (t Template) WithUIDs(n uint64) []byte {
	b := bytes.Clone(t.body)
	copy(b[t.requestAt:], fmt.Sprintf("%08x-0000-4000-a000-%012x", n>>48, n&(1<<48-1)))
	copy(b[t.uidAt:], fmt.Sprintf("%08x-0000-4000-8000-%012x", n>>48, n&(1<<48-1)))
	return b
}

// StatusError is a webhook's answer with a status other than 200: the
// request was not admitted, nor reviewed (overloaded, not ready, a bad
// request).
type StatusError struct {
	Code int
	// Body is the start of the answer.
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("status %d: %s", e.Code, e.Body) }

// ErrNotReview: the webhook answered 200 with something other than an
// AdmissionReview with a response.
var ErrNotReview = errors.New("not an AdmissionReview answer")

// Send posts the review body to a webhook's url and returns whether its
// answer allows the request. Errors: the transport's, a *StatusError, or
// ErrNotReview.
func Send(ctx context.Context, client *http.Client, url string, body []byte) (allowed bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, &StatusError{Code: resp.StatusCode, Body: fmt.Sprintf("%.200s", b)}
	}
	var review struct {
		Response *struct {
			UID     string `json:"uid"`
			Allowed bool   `json:"allowed"`
		} `json:"response"`
	}
	if err := json.Unmarshal(b, &review); err != nil || review.Response == nil {
		return false, fmt.Errorf("%w: %.200s", ErrNotReview, b)
	}
	return review.Response.Allowed, nil
}
