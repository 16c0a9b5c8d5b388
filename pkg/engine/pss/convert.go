package pss

import (
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// ErrUnsupportedKind is returned (wrapped) by PodFromResource for a kind that
// has no pod template.
var ErrUnsupportedKind = errors.New("kind has no pod spec")

// ToPod decodes a Pod document into the API type, for CheckPod. Only the
// fields the Pod Security Standards checks read are filled in, straight from
// the document; those are type-checked as JSON decoding would (a field of
// the wrong type is an error wrapping ErrInvalidPod). The result is meant
// for CheckPod, not as a general-purpose Pod.
func ToPod(doc map[string]any) (*corev1.Pod, error) {
	return decodePod(doc)
}

// toPodJSON decodes a Pod document completely through JSON, as Kyverno does.
// It is the reference the direct decoder is tested against.
func toPodJSON(doc map[string]any) (*corev1.Pod, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPod, err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPod, err)
	}
	return pod, nil
}

// PodFromResource returns the pod-shaped document (metadata and spec) that
// Kyverno evaluates for a resource of the given kind: the resource itself for
// a Pod, spec.template for DaemonSet, Deployment, Job, StatefulSet,
// ReplicaSet and ReplicationController, and spec.jobTemplate.spec.template
// for a CronJob.
func PodFromResource(kind string, resource map[string]any) (map[string]any, error) {
	switch kind {
	case "Pod":
		return resource, nil
	case "DaemonSet", "Deployment", "Job", "StatefulSet", "ReplicaSet", "ReplicationController":
		tmpl, _ := lookup(resource, "spec", "template").(map[string]any)
		return map[string]any{"metadata": tmpl["metadata"], "spec": tmpl["spec"]}, nil
	case "CronJob":
		tmpl, _ := lookup(resource, "spec", "jobTemplate", "spec", "template").(map[string]any)
		return map[string]any{"metadata": tmpl["metadata"], "spec": tmpl["spec"]}, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsupportedKind, kind)
}

func lookup(doc map[string]any, path ...string) any {
	var cur any = doc
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}
