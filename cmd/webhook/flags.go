package main

import (
	"flag"
	"fmt"
	"net"
	"strconv"

	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/webhook"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
	"github.com/verdict-dev/verdict/internal/webhook/registrar"
)

// bindFlags binds every field of cfg to a kebab-case flag; the values in
// cfg are the defaults.
func bindFlags(fs *flag.FlagSet, cfg *webhook.Config) {
	fs.StringVar(&cfg.Address, "address", cfg.Address, "address of the HTTPS admission server")
	fs.StringVar(&cfg.ProbeAddress, "probe-address", cfg.ProbeAddress, "address that also serves /healthz, /readyz and /metrics over plain HTTP (empty: none)")
	fs.BoolVar(&cfg.Pprof, "pprof", cfg.Pprof, "serve Go's profiles at /debug/pprof/ on the probe address (off by default; for measuring, not for production)")
	fs.StringVar(&cfg.CertFile, "tls-cert-file", cfg.CertFile, "serving certificate chain (PEM), reloaded when it changes")
	fs.StringVar(&cfg.KeyFile, "tls-private-key-file", cfg.KeyFile, "serving private key (PEM), reloaded when it changes")
	fs.StringVar(&cfg.ClientCAFile, "client-ca-file", cfg.ClientCAFile, "CA bundle (PEM) that callers' client certificates must chain to: mutual TLS, so that only the API server can send reviews (empty: any caller)")
	fs.DurationVar(&cfg.CertReloadInterval, "tls-reload-interval", cfg.CertReloadInterval, "how often the certificate files are checked for changes")
	fs.Int64Var(&cfg.MaxRequestBytes, "max-request-bytes", cfg.MaxRequestBytes, "largest request body accepted; larger ones get 413")
	fs.IntVar(&cfg.MaxConcurrentBodyReads, "max-concurrent-body-reads", cfg.MaxConcurrentBodyReads, "request bodies read at once, before the evaluation slots and within each request's deadline; one more gets 429")
	fs.Int64Var(&cfg.MaxBodyBytesInFlight, "max-body-bytes-in-flight", cfg.MaxBodyBytesInFlight, "bytes of request bodies held at once (read and being evaluated), charged as they arrive; a body that would pass it gets 429")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "upper bound of one admission evaluation (the API server's ?timeout= lowers it)")
	fs.IntVar(&cfg.MaxConcurrentEvaluations, "max-concurrent-evaluations", cfg.MaxConcurrentEvaluations, "admission requests evaluated at once; more wait for a slot")
	fs.DurationVar(&cfg.EvaluationQueueTimeout, "evaluation-queue-timeout", cfg.EvaluationQueueTimeout, "how long a request waits for an evaluation slot before it is answered 429 (the webhook's failurePolicy then applies)")
	fs.IntVar(&cfg.MaxWarnings, "max-warnings", cfg.MaxWarnings, "most warnings in one admission response")
	platform.StringsFlag(fs, "decision-object-kinds", "kinds whose admitted objects the admission log records with their decisions, for verdict whatif (Pod, or * for every kind; never a Secret; none by default)", &cfg.DecisionObjects.Kinds)
	platform.StringsFlag(fs, "decision-object-namespaces", "record objects only in these namespaces (none: every namespace)", &cfg.DecisionObjects.Namespaces)
	platform.StringsFlag(fs, "decision-object-redact", "fields removed from a recorded object first: dotted paths, [*] for every element of a list (spec.containers[*].env)", &cfg.DecisionObjects.Redact)
	fs.BoolVar(&cfg.KyvernoMetrics, "kyverno-metrics", cfg.KyvernoMetrics, "also record admission requests and rule results under Kyverno's metric names and labels (kyverno_admission_requests_total, kyverno_policy_results_total, ...), for dashboards built for Kyverno; times each rule")
	fs.BoolVar(&cfg.Shadow, "shadow", cfg.Shadow, "evaluate without effect, beside a running Kyverno: allow every request unchanged with no warning, queue no work, publish the results; the leader registers validating webhooks only, all failurePolicy Ignore, and writes no policy status")
	fs.DurationVar(&cfg.WorkPublishTimeout, "work-publish-timeout", cfg.WorkPublishTimeout, "how long generate work may take to be acknowledged before the answer")
	fs.Func("on-work-publish-failure", "deny or allow a request whose generate work was not acknowledged in time (default "+string(cfg.OnWorkPublishFailure)+")", func(s string) error {
		cfg.OnWorkPublishFailure = webhook.WorkFailureMode(s)
		return nil
	})
	fs.IntVar(&cfg.UnverifiedResultsPerSecond, "unverified-results-per-second", cfg.UnverifiedResultsPerSecond, "results a caller without a verified client certificate may make the webhook publish per second, per caller address (twice as many in a burst); more are dropped and counted (0: no limit)")
	fs.IntVar(&cfg.UnverifiedWorkPerSecond, "unverified-work-per-second", cfg.UnverifiedWorkPerSecond, "generate and mutate work items a caller without a verified client certificate may make the webhook queue per second, per caller address; more fail to publish (--on-work-publish-failure decides) (0: no limit)")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", cfg.ShutdownDelay, "how long to keep serving with /readyz failing after SIGTERM")
	fs.DurationVar(&cfg.ShutdownGracePeriod, "shutdown-grace-period", cfg.ShutdownGracePeriod, "how long in-flight requests may take to finish at shutdown")
	fs.DurationVar(&cfg.FlushTimeout, "flush-timeout", cfg.FlushTimeout, "how long buffered results may take to flush at shutdown")
	fs.DurationVar(&cfg.ShutdownBudget, "shutdown-budget", cfg.ShutdownBudget, "bound of the whole shutdown (delay, drain, flush); keep it under the pod's termination grace period")
	platform.StringsFlag(fs, "policies", "file or directory of ClusterPolicies, Policies and PolicyExceptions (repeatable, or comma-separated)", &cfg.PolicyPaths)
	platform.StringsFlag(fs, "excluded-namespaces", "namespaces no webhook receives, added to kube-system, kube-public, kube-node-lease and Verdict's own (repeatable, or comma-separated; the NATS namespace belongs here)", &cfg.ExcludedNamespaces)
	platform.StringsFlag(fs, "excluded-resources", "resources no webhook receives, as resource[.group][/subresource], added to the built-in list (Nodes, Leases, Events, reviews, ...) (repeatable, or comma-separated)", &cfg.ExcludedResources)
	platform.BindLogFlags(fs, &cfg.Log)
}

// clusterOnly are the flags of cluster mode; files mode refuses them.
var clusterOnly = []string{
	"kubeconfig", "api-qps", "api-burst", "api-timeout", "namespace", "identity", "service-name", "service-port",
	"webhook-url", "register-webhooks", "renew-certificates", "ca-secret", "tls-secret", "certificate-ips", "lease-name",
	"replica-selector",
}

// bindServiceFlags binds the mode, JetStream and cluster mode's settings.
func bindServiceFlags(fs *flag.FlagSet, cfg *webhookapp.Config) {
	fs.Func("mode", "cluster (policies from the API server, certificate from a Secret, leader-elected registrar and renewer) or files (policies and certificate from files) (default "+string(cfg.Mode)+")", func(s string) error {
		cfg.Mode = webhookapp.Mode(s)
		return nil
	})
	platform.BindNATSFlags(fs, &cfg.NATS)
	fs.IntVar(&cfg.GCPercent, "gc-percent", cfg.GCPercent, "the garbage collector's target percentage when the GOGC environment variable is not set (the memory limit, GOMEMLIMIT, still bounds the heap)")
	fs.IntVar(&cfg.ResultBuffer, "result-buffer", cfg.ResultBuffer, "results waiting to be published before new ones are dropped (and counted)")
	fs.DurationVar(&cfg.ResultLinger, "result-linger", cfg.ResultLinger, "how long admissions' results are gathered before they are sent to NATS together (0 to 1s; 0 sends each at once)")
	fs.BoolVar(&cfg.Decisions, "decisions", cfg.Decisions, "record every answered admission request (allowed, warned, denied, patched) in VERDICT_DECISIONS, the admission log")
	fs.StringVar(&cfg.DecisionSpool, "decision-spool", cfg.DecisionSpool, "folder keeping each decision until the stream acknowledges it, so that a replica killed with decisions in its buffer, or NATS away past their deadline, loses none (none: not kept)")
	platform.BytesVar(fs, &cfg.DecisionSpoolBytes, "decision-spool-bytes", "bound of --decision-spool on disk (a quantity: 64Mi)")
	platform.BindEvaluationLimitFlags(fs, &cfg.Limits)
	platform.BindKubeFlags(fs, &cfg.Kube)
	platform.BindPolicyHTTPFlags(fs, &cfg.PolicyHTTP)
	platform.BindRegistryFlags(fs, &cfg.Registries)
	platform.BindExceptionFlags(fs, &cfg.Exceptions)
	platform.BindPolicyAPIFlag(fs, &cfg.PolicyAPI)
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "Verdict's namespace: Lease, Secrets; also skipped by the webhooks")
	fs.StringVar(&cfg.Identity, "identity", cfg.Identity, "this replica's name in the Lease (the pod name)")
	fs.StringVar(&cfg.ServiceName, "service-name", cfg.ServiceName, "the webhook's Service")
	fs.Func("service-port", "the webhook Service's port (default 443)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 32)
		cfg.ServicePort = int32(n)
		return err
	})
	fs.StringVar(&cfg.WebhookURL, "webhook-url", cfg.WebhookURL, "reach the webhook at this URL instead of the Service (local control plane)")
	fs.BoolVar(&cfg.Register, "register-webhooks", cfg.Register, "keep the webhook configurations current (leader only)")
	fs.BoolVar(&cfg.GenerateAdmissionPolicies, "generate-admission-policies", cfg.GenerateAdmissionPolicies, "have the API server enforce the ValidatingPolicies that ask for it (autogen.validatingAdmissionPolicy) as ValidatingAdmissionPolicies (leader only)")
	fs.BoolVar(&cfg.RenewCerts, "renew-certificates", cfg.RenewCerts, "issue and renew the serving certificate (leader only); turn off with cert-manager")
	fs.StringVar(&cfg.CASecret, "ca-secret", cfg.CASecret, "Secret holding the CA and the CA bundle")
	fs.StringVar(&cfg.TLSSecret, "tls-secret", cfg.TLSSecret, "Secret holding the serving certificate")
	platform.ListFlag(fs, "certificate-ips", "extra IP addresses in the serving certificate (repeatable, or comma-separated)", nil, func(s string) error {
		ip := net.ParseIP(s)
		if ip == nil {
			return fmt.Errorf("not an IP address: %q", s)
		}
		cfg.CertIPs = append(cfg.CertIPs, ip)
		return nil
	})
	fs.StringVar(&cfg.LeaseName, "lease-name", cfg.LeaseName, "the Lease leaders take")
	fs.StringVar(&cfg.ReplicaSelector, "replica-selector", cfg.ReplicaSelector, "label selector of the webhook's own pods in --namespace: while one of them runs an earlier release (no "+registrar.LabelWebhookAPI+" label of this release's level), the webhooks point at the paths it serves (needs list and watch on pods)")
}
