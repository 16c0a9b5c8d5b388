// Package service is the start-up every Verdict service shares, so that a
// service is a typed Config, a Run function and its own logic:
//
//   - LogConfig: the zerolog logger (json or console), with client-go's
//     klog routed into it;
//   - KubeConfig: the rest config (kubeconfig file or in-cluster) with the
//     service's QPS, burst and request timeout;
//   - NATSConfig: the JetStream connection (natsconn.Config: URLs,
//     credentials file, NKey seed, TLS CA and client certificate, shared
//     with the pipeline CLI's `verdict work`) and the streams' replicas and
//     size limits, the same on every service; its ConnOptions add the
//     queue's metrics (pkg/queue/queueprom) on the service's registry;
//   - NewRegistry: a metrics registry with the Go and process collectors.
//
// Each has defaults, a Validate that returns every problem, and a Bind
// function that binds its fields to the same kebab-case flags in every
// service.
package platform
