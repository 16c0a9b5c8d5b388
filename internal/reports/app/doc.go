// Package reporterapp is the reporter service: cmd/reporter's
// commands, with everything but flag parsing. It composes the packages that
// do the work and owns none of their logic:
//
//   - Config (with DefaultConfig and Validate) is the service's one
//     configuration; cmd/reporter binds a kebab-case flag to each
//     field. An invalid Config is ErrInvalidConfig, every problem joined.
//   - Run is `reporter run`: it builds the shared clients (rest config,
//     dynamic and metadata clients, one verify.Checker, one metrics
//     registry, one reporter.Writer, the NATS connection), provisions the
//     streams and the reporter's durable consumers, serves /metrics,
//     /healthz and /readyz, and runs a reporter.Projector and, with
//     Config.Scan, a scanner.Scanner on an informer-backed policy cache,
//     until ctx ends or either stops; then it drains.
//   - Replay is `reporter replay [--prune]`: reporter.Rebuild with the same
//     clients, printing progress.
//
// internal/reports/reporter (the projection of VERDICT_RESULTS into reports) and
// internal/reports/scanner (the background scan, which imports the reporter) know
// nothing of this package, as internal/webhook knows nothing of
// internal/webhook/app.
package app
