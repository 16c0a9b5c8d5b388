package registrar

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// LabelWebhookAPI is the label the chart gives every webhook pod: the
// WebhookAPI of the binary it runs. A pod without it runs a release
// before the label: WebhookAPI 1.
const LabelWebhookAPI = "verdict.dev/webhook-api"

// WebhookAPI is the set of paths this release's webhook serves, as a
// number that grows when a path is added that configurations point at:
//
//  1. PathMutate, PathValidate and PathValidatePolicy.
//  2. Those, and the scoped paths (PathMutateCluster, PathValidateCluster,
//     PathMutateNamespaced, PathValidateNamespaced) and PathValidateTTL.
//
// The registrar points the webhooks at the paths of the lowest level any
// replica runs (Replicas), so a rolling upgrade never sends a request to
// a replica that answers 404.
const WebhookAPI = 2

// Replicas follows the webhook's own pods and tells the registrar the
// lowest WebhookAPI among them.
type Replicas struct {
	selector  string
	namespace string
	lister    corelisters.PodLister
	synced    cache.InformerSynced
	changed   chan struct{}
}

// WatchReplicas starts following the pods in namespace that selector
// (a label selector) selects: the replicas of the webhook Deployment,
// old and new during a rolling upgrade. It needs list and watch on pods
// there. It stops when ctx ends.
func WatchReplicas(ctx context.Context, client kubernetes.Interface, namespace, selector string) (*Replicas, error) {
	if _, err := labels.Parse(selector); err != nil {
		return nil, fmt.Errorf("replica selector %q: %w", selector, err)
	}
	f := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	pods := f.Core().V1().Pods()
	r := &Replicas{selector: selector, namespace: namespace, lister: pods.Lister(), synced: pods.Informer().HasSynced, changed: make(chan struct{}, 1)}
	signal := func() {
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal() },
		UpdateFunc: func(any, any) { signal() },
		DeleteFunc: func(any) { signal() },
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	return r, nil
}

// Changed is signalled (without blocking) when a replica is added,
// changed or removed.
func (r *Replicas) Changed() <-chan struct{} { return r.changed }

// replicaSyncWait bounds how long Lowest waits for the first list.
const replicaSyncWait = 10 * time.Second

// Lowest returns the lowest WebhookAPI of the replicas that may still be
// called, and the name of one pod at that level (none when there are no
// replicas: every replica to come runs this release, WebhookAPI). Pods
// that are being deleted or have ended receive no requests and do not
// count; pending ones do (they may become ready). Until the pods have
// been listed it waits up to replicaSyncWait, then fails: writing either
// shape without knowing could send requests to a path a replica does not
// serve, or keep the earlier shape on a whole release.
func (r *Replicas) Lowest(ctx context.Context) (level int, pod string, err error) {
	if !r.synced() {
		wctx, cancel := context.WithTimeout(ctx, replicaSyncWait)
		ok := cache.WaitForCacheSync(wctx.Done(), r.synced)
		cancel()
		if !ok {
			return 0, "", fmt.Errorf("the webhook's pods (%q in %s) are not listed yet: the registrar needs list and watch on pods there", r.selector, r.namespace)
		}
	}
	sel, err := labels.Parse(r.selector)
	if err != nil {
		return 0, "", err
	}
	pods, err := r.lister.Pods(r.namespace).List(sel)
	if err != nil {
		return 0, "", err
	}
	level = WebhookAPI
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if l := podWebhookAPI(p); l < level || pod == "" && l == level {
			level, pod = l, p.Name
		}
	}
	return level, pod, nil
}

// podWebhookAPI reads a pod's LabelWebhookAPI: 1 when it is missing or
// not a positive number (a release before the label).
func podWebhookAPI(p *corev1.Pod) int {
	n, err := strconv.Atoi(p.Labels[LabelWebhookAPI])
	if err != nil || n < 1 {
		return 1
	}
	return n
}
