package registrar

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// WatchConfigurations signals on the returned channel whenever one of the
// two configurations is added, edited or deleted by anyone, so that the
// leader restores it at once. It stops when ctx ends.
func WatchConfigurations(ctx context.Context, client kubernetes.Interface, opts Options) <-chan struct{} {
	opts.defaults()
	poke := make(chan struct{}, 1)
	signal := func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal() },
		UpdateFunc: func(any, any) { signal() },
		DeleteFunc: func(any) { signal() },
	}
	for _, name := range []string{opts.MutatingName, opts.ValidatingName} {
		f := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }))
		var inf cache.SharedIndexInformer
		if name == opts.MutatingName {
			inf = f.Admissionregistration().V1().MutatingWebhookConfigurations().Informer()
		} else {
			inf = f.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer()
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			continue
		}
		f.Start(ctx.Done())
	}
	return poke
}
