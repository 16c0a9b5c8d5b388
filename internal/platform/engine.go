package platform

import (
	"errors"
	"flag"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// EvaluationLimits bound the work and memory of one evaluation in every
// service that evaluates policies (the webhook, the reporter's scans, the
// generator, the cleaner): the engine's limits (pkg/engine, limits.go),
// with its defaults. A rule that reaches one ends with an error whose
// message starts with engine.StoppedPrefix, never with a pass.
type EvaluationLimits struct {
	// MaxForEachElements is the longest list one foreach iterates.
	MaxForEachElements int
	// MaxForEachDepth is how deep foreach blocks nest.
	MaxForEachDepth int
	// WorkBudget is the steps one request (or scan of one resource) may
	// take over every policy evaluated with it.
	WorkBudget int64
	// MaxExpressionSteps bounds the work of one JMESPath expression.
	MaxExpressionSteps int64
	// MemoryBudget is the memory, in bytes, one rule may allocate or
	// load.
	MemoryBudget int64
}

// DefaultEvaluationLimits are the engine's defaults.
func DefaultEvaluationLimits() EvaluationLimits {
	return EvaluationLimits{
		MaxForEachElements: engine.DefaultMaxForEachElements,
		MaxForEachDepth:    engine.DefaultMaxForEachDepth,
		WorkBudget:         engine.DefaultWorkBudget,
		MaxExpressionSteps: engine.DefaultMaxExpressionSteps,
		MemoryBudget:       engine.DefaultMemoryBudget,
	}
}

// Flags of EvaluationLimits.
const (
	FlagMaxForEachElements = "max-foreach-elements"
	FlagMaxForEachDepth    = "max-foreach-depth"
	FlagWorkBudget         = "work-budget"
	FlagMaxExpressionSteps = "max-expression-steps"
	FlagMemoryBudget       = "memory-budget"
)

// Validate returns every problem, each wrapping ErrInvalidConfig and
// naming its flag. A limit of zero or below would stop every rule that
// reaches it, or none: it is refused rather than read as "no limit".
func (l EvaluationLimits) Validate() error {
	var errs []error
	d := DefaultEvaluationLimits()
	positive := func(flag string, v int64, def string) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%w: --%s %d: must be positive (the default is %s)", ErrInvalidConfig, flag, v, def))
		}
	}
	positive(FlagMaxForEachElements, int64(l.MaxForEachElements), strconv.Itoa(d.MaxForEachElements))
	positive(FlagMaxForEachDepth, int64(l.MaxForEachDepth), strconv.Itoa(d.MaxForEachDepth))
	positive(FlagWorkBudget, l.WorkBudget, strconv.FormatInt(d.WorkBudget, 10))
	positive(FlagMaxExpressionSteps, l.MaxExpressionSteps, strconv.FormatInt(d.MaxExpressionSteps, 10))
	positive(FlagMemoryBudget, l.MemoryBudget, resource.NewQuantity(d.MemoryBudget, resource.BinarySI).String())
	return errors.Join(errs...)
}

// Options are the limits as the engine's options.
func (l EvaluationLimits) Options() []engine.Option {
	return []engine.Option{
		engine.WithMaxForEachElements(l.MaxForEachElements),
		engine.WithMaxForEachDepth(l.MaxForEachDepth),
		engine.WithWorkBudget(l.WorkBudget),
		engine.WithMaxExpressionSteps(l.MaxExpressionSteps),
		engine.WithMemoryBudget(l.MemoryBudget),
	}
}

// BindEvaluationLimitFlags binds --max-foreach-elements,
// --max-foreach-depth, --work-budget, --max-expression-steps and
// --memory-budget (a quantity: 64Mi); the values in l are the defaults.
func BindEvaluationLimitFlags(fs *flag.FlagSet, l *EvaluationLimits) {
	fs.IntVar(&l.MaxForEachElements, FlagMaxForEachElements, l.MaxForEachElements, "longest list one foreach iterates; a longer one ends the rule with an error")
	fs.IntVar(&l.MaxForEachDepth, FlagMaxForEachDepth, l.MaxForEachDepth, "how deep foreach blocks nest (1: no foreach inside a foreach); a deeper one ends the rule with an error")
	fs.Int64Var(&l.WorkBudget, FlagWorkBudget, l.WorkBudget, "steps (rules, foreach elements, conditions, patterns, 1 KiB of matching) one evaluation may take over all its policies; once spent, the remaining rules end with an error")
	fs.Int64Var(&l.MaxExpressionSteps, FlagMaxExpressionSteps, l.MaxExpressionSteps, "steps one JMESPath expression may take")
	BytesVar(fs, &l.MemoryBudget, FlagMemoryBudget, "memory one rule may allocate or load (JMESPath functions, context entries, substitutions), a quantity: 64Mi; over it, the rule ends with an error")
}

// EngineConfig is what a service's engine over the cluster is made of.
type EngineConfig struct {
	// Namespace is Verdict's namespace: no policy reads its Secrets,
	// through an apiCall or a read of resources. Required.
	Namespace string
	// PolicyHTTP says whether and where policies may call services over
	// HTTP.
	PolicyHTTP policyhttp.Config
	// Limits bound each evaluation.
	Limits EvaluationLimits
	// Registries is how verifyImages entries reach registries.
	Registries Registries
	// ImageCache is the cache of image verifications the service's
	// replicas share (bus.ImageCache), behind each one's memory; nil:
	// memory only.
	ImageCache imageverify.Cache
	// Metrics is where the engine's collectors (image verification's)
	// are registered: the service's /metrics registry; nil: none.
	Metrics prometheus.Registerer
}

// Engine is a service's policy engine over the cluster, and the
// sources it reads through.
type Engine struct {
	*engine.Engine
	// Loader serves configMap and apiCall context entries and policies'
	// HTTP calls, Verdict's Secrets kept from it.
	Loader *policycache.Loader
	// Resources serves policies' reads of resources (CEL's resource.Get
	// and resource.List, validate.cel params), each bounded, Verdict's
	// Secrets kept from it.
	Resources *kubeutil.Lister
	// Lister serves generate's clone sources and mutate-existing
	// targets, Verdict's Secrets kept from it: set with
	// WithClusterLister, nil otherwise.
	Lister *kubeutil.Lister
	opts   []engine.Option
}

// Options are the engine options the Engine was built with: the
// sources, the limits and the EngineOption's. The webhook's admission
// server builds its own engine (its trigger lister, its clock) from them.
func (e *Engine) Options() []engine.Option { return e.opts }

// EngineOption adds to what NewEngine builds.
type EngineOption func(*engineSetup)

type engineSetup struct {
	clusterLister bool
	extra         []engine.Option
}

// WithClusterLister serves generate's clone and cloneList sources and
// mutate-existing targets from the cluster (kubeutil.Lister, Verdict's
// Secrets kept from it): the generator's.
func WithClusterLister() EngineOption {
	return func(s *engineSetup) { s.clusterLister = true }
}

// WithEngineOptions adds engine options after the set-up's own.
func WithEngineOptions(opts ...engine.Option) EngineOption {
	return func(s *engineSetup) { s.extra = append(s.extra, opts...) }
}

// NewEngine builds a service's engine over the cluster: the context
// loader (API calls and ConfigMaps through kc.Kube, policies' HTTP calls
// as cfg.PolicyHTTP allows), the reads of resources (through kc.Dynamic
// and kc.Mapper, each call and list bounded), both refusing the Secrets
// of cfg.Namespace, and cfg.Limits. The engine confines a namespaced
// policy's loads and reads to its own namespace (pkg/engine, tenancy.go)
// whatever the sources. An invalid configuration is an error wrapping
// ErrInvalidConfig.
func NewEngine(kc *Clients, cfg EngineConfig, opts ...EngineOption) (*Engine, error) {
	if kc == nil || kc.Kube == nil || kc.Dynamic == nil || kc.Mapper == nil {
		return nil, fmt.Errorf("%w: the engine needs the Kubernetes, dynamic clients and a REST mapper", ErrInvalidConfig)
	}
	if cfg.Namespace == "" {
		return nil, fmt.Errorf("%w: the engine needs Verdict's namespace, whose Secrets no policy reads", ErrInvalidConfig)
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	var s engineSetup
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	hc, err := policyhttp.New(cfg.PolicyHTTP)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	loader, err := policycache.NewLoader(kc.Kube, policycache.WithHTTP(hc), policycache.WithProtectedNamespace(cfg.Namespace))
	if err != nil {
		return nil, err
	}
	protect := kubeutil.WithProtectedNamespace(cfg.Namespace)
	resources := kubeutil.NewContextLister(kc.Dynamic, kc.Mapper, protect)
	engOpts := []engine.Option{engine.WithContextLoader(loader), engine.WithContextResources(resources)}
	var lister *kubeutil.Lister
	if s.clusterLister {
		lister = kubeutil.NewLister(kc.Dynamic, kc.Mapper, protect)
		engOpts = append(engOpts, engine.WithResourceLister(lister))
	}
	verifier, err := cfg.Registries.engineOption(cfg.Metrics, cfg.ImageCache, cfg.Registries.Credentials(kc.Kube, cfg.Namespace))
	if err != nil {
		return nil, err
	}
	engOpts = append(engOpts, verifier)
	engOpts = append(append(engOpts, cfg.Limits.Options()...), s.extra...)
	eng, err := engine.New(engOpts...)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return &Engine{Engine: eng, Loader: loader, Resources: resources, Lister: lister, opts: engOpts}, nil
}
