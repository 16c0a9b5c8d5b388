package main

import (
	"flag"

	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/platform/cliflag"
	reporterapp "github.com/verdict-dev/verdict/internal/reports/app"
)

// bindFlags binds every field of cfg to a kebab-case flag; the values in
// cfg are the defaults.
func bindFlags(fs *flag.FlagSet, cfg *reporterapp.Config) {
	platform.BindKubeFlags(fs, &cfg.Kube)
	platform.BindPolicyHTTPFlags(fs, &cfg.PolicyHTTP)
	platform.BindRegistryFlags(fs, &cfg.Registries)
	platform.BindEvaluationLimitFlags(fs, &cfg.Limits)
	platform.BindExceptionFlags(fs, &cfg.Exceptions)
	platform.BindPolicyAPIFlag(fs, &cfg.PolicyAPI)
	fs.Float64Var(&cfg.WriteQPS, "write-qps", cfg.WriteQPS, "report writes (create, apply, delete) per second")
	fs.StringVar(&cfg.ReportNamePrefix, "report-name-prefix", cfg.ReportNamePrefix, "start every report's name with this before the resource's UID (a shadow beside Kyverno: \"verdict-\", since Kyverno names its reports after the UID); a report of the name that another controller manages is never written or deleted")
	fs.IntVar(&cfg.WriteBurst, "write-burst", cfg.WriteBurst, "burst of report writes")
	platform.BindNATSFlags(fs, &cfg.NATS)
	fs.DurationVar(&cfg.VerifyGrace, "verify-grace", cfg.VerifyGrace, "how long a result's resource may be missing (a CREATE is evaluated before it is stored) before the result is dropped as unverified")
	fs.DurationVar(&cfg.CoalesceWindow, "coalesce-window", cfg.CoalesceWindow, "how long a resource's results gather before its report is written")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "result messages one replica holds at once (summed over replicas: at most 500)")
	fs.IntVar(&cfg.FlushWorkers, "flush-workers", cfg.FlushWorkers, "reports one replica writes at once")
	fs.DurationVar(&cfg.AckWait, "ack-wait", cfg.AckWait, "how long a replica may hold a message without a sign of life before another gets it")
	fs.IntVar(&cfg.Attempts, "attempts", cfg.Attempts, "deliveries of a result whose report cannot be written before it is dead-lettered")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long results in flight may take to be written at shutdown")
	fs.IntVar(&cfg.PendingResults, "pending-results", cfg.PendingResults, "results whose resource is not found yet (within --verify-grace) one replica holds unacknowledged; with twice --concurrency at most 1000, summed over replicas: the consumer's unacknowledged messages, shared with verified results")
	platform.BytesVar(fs, &cfg.PendingBytes, "pending-bytes", "size of the result messages one replica holds pending (a quantity: 4Mi)")
	fs.IntVar(&cfg.PendingRechecks, "pending-rechecks", cfg.PendingRechecks, "pending results beyond --pending-results one replica remembers to check again (about 40 bytes each; their messages acknowledged, a recheck a second later and one when the grace ends); 0: given up at once")
	fs.BoolVar(&cfg.Scan, "scan", cfg.Scan, "run the background scan (policy changes, the periodic scan, purging deleted resources' results)")
	fs.DurationVar(&cfg.ScanInterval, "scan-interval", cfg.ScanInterval, "period of the full background scan (0: only on policy changes)")
	fs.DurationVar(&cfg.CandidateWindow, "candidate-window", cfg.CandidateWindow, "how far back the admission log's recorded requests go when a candidate policy (verdict.dev/candidate) is evaluated (0: its objects only)")
	fs.IntVar(&cfg.ScanConcurrency, "scan-concurrency", cfg.ScanConcurrency, "scan items one replica works on at once")
	fs.BoolVar(&cfg.KyvernoMetrics, "kyverno-metrics", cfg.KyvernoMetrics, "also record the background scans' rule results under Kyverno's metric names and labels (kyverno_policy_results_total with rule_execution_cause=background_scan, ...), for dashboards built for Kyverno; times each rule")
	fs.StringVar(&cfg.ProbeAddress, "probe-address", cfg.ProbeAddress, "address serving /metrics, /healthz and /readyz (empty: none)")
	fs.BoolVar(&cfg.Serve, "serve-reports", cfg.Serve, "serving mode: answer the PolicyReport API from VERDICT_RESULTS as an aggregated API server instead of writing reports into etcd")
	fs.StringVar(&cfg.ServeAddress, "serve-address", cfg.ServeAddress, "IP address the serving mode listens on")
	fs.IntVar(&cfg.ServePort, "serve-port", cfg.ServePort, "HTTPS port of the serving mode")
	fs.StringVar(&cfg.ServeCertFile, "serve-tls-cert-file", cfg.ServeCertFile, "serving mode certificate (PEM; empty: self-signed, in --serve-cert-dir)")
	fs.StringVar(&cfg.ServeKeyFile, "serve-tls-private-key-file", cfg.ServeKeyFile, "serving mode private key (PEM)")
	fs.DurationVar(&cfg.ServeSnapshotInterval, "serve-snapshot-interval", cfg.ServeSnapshotInterval, "serving mode: how often a replica stores a snapshot of its index in JetStream, which starting replicas begin from instead of reading VERDICT_RESULTS from its first message (0: none stored)")
	fs.StringVar(&cfg.ServeCertDir, "serve-cert-dir", cfg.ServeCertDir, "where the serving mode writes its self-signed certificate")
	fs.StringVar(&cfg.ServeTLSSecret, "serve-tls-secret", cfg.ServeTLSSecret, "serving mode: the kubernetes.io/tls Secret (in --namespace) whose certificate is served, followed as it is renewed (instead of the files)")
	fs.StringVar(&cfg.ServeCASecret, "serve-ca-secret", cfg.ServeCASecret, "serving mode: the CA Secret; when set, the replica holding --serve-lease keeps it, --serve-tls-secret and the APIServices' caBundle current (empty: another keeps the certificate)")
	fs.StringVar(&cfg.ServeServiceName, "serve-service-name", cfg.ServeServiceName, "serving mode: the Service in front of the replicas (the names in the certificate)")
	fs.StringVar(&cfg.ServeLeaseName, "serve-lease", cfg.ServeLeaseName, "serving mode: the Lease of the replica keeping the certificate")
	cliflag.List(fs, "serve-api-services", "serving mode: the APIServices whose caBundle the certificate's keeper sets (repeatable, or comma-separated; replaces the default)",
		func() { cfg.ServeAPIServices = nil }, func(s string) error { cfg.ServeAPIServices = append(cfg.ServeAPIServices, s); return nil })
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "Verdict's namespace: the serving mode's Secrets and Lease")
	fs.StringVar(&cfg.Identity, "identity", cfg.Identity, "this replica's name in the Lease (the pod name)")
	platform.BindLogFlags(fs, &cfg.Log)
}
