# Verdict: Kubernetes admission policies in the Kyverno language.
GO        ?= go
BIN       := bin
GOFLAGS   ?=
PKGS      := ./...

.PHONY: all build services images test unit e2e topology controlplane helm chart-crds conformance bench fuzz lint fmt vet demo clean verify crds verify-crds

all: build

## build: compile the verdict CLI into bin/
build:
	$(GO) build $(GOFLAGS) -o $(BIN)/verdict ./cmd/verdict

## services: compile the services (webhook, reporter, generator, cleaner) into bin/
services:
	$(GO) build $(GOFLAGS) -o $(BIN)/ ./cmd/webhook ./cmd/reporter ./cmd/generator ./cmd/cleaner

# Container images, named <IMAGE_REGISTRY>/verdict-<service>:<IMAGE_TAG> (the
# chart's values follow the same convention). SOURCE_DATE_EPOCH (default: the
# last commit's time) is stamped on every image and file, so a build is
# reproducible: the same tree gives the same digests.
IMAGE_REGISTRY    ?= ghcr.io/verdict-dev
IMAGE_TAG         ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_REVISION    ?= $(shell git rev-parse HEAD 2>/dev/null)
IMAGE_ARCH        ?= $(shell $(GO) env GOARCH)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGES_FLAGS      ?=

## images: one image tarball per service into bin/images/ (static binaries on an empty base, no container engine; docs/images.md)
images:
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./hack/images --out-dir=$(BIN)/images \
	  --registry=$(IMAGE_REGISTRY) --tag=$(IMAGE_TAG) --revision=$(IMAGE_REVISION) --arch=$(IMAGE_ARCH) $(IMAGES_FLAGS)

# The local control plane's binaries (built once, cached in .cache/).
CONTROLPLANE_BIN = $$(./hack/controlplane.sh)

# helm v4, and v3 the chart must also work with, built from their Go
# modules (hack/tools/helm, hack/tools/helm3) once, cached in .cache.
HELM_BIN = $$(./hack/helm.sh)
HELM3_BIN = $$(./hack/helm.sh 3)

## test: every test: unit, conformance corpus, queue (embedded NATS), end-to-end (real kube-apiserver), the Helm chart
test: vet controlplane helm
	VERDICT_CONTROLPLANE_BIN=$(CONTROLPLANE_BIN) VERDICT_HELM=$(HELM_BIN) VERDICT_HELM3=$(HELM3_BIN) $(GO) test $(GOFLAGS) -count=1 -timeout 30m $(PKGS)

## unit: fast tests only (no corpus run, no control plane)
unit:
	$(GO) test $(GOFLAGS) -count=1 -short $(PKGS)

# Packages whose tests run against the real control plane: those whose test
# binaries link internal/testkit/controlplane.
E2E_PKGS = $$($(GO) list -test -f '{{if .ForTest}}{{.ForTest}} {{join .Deps " "}}{{end}}' ./... | awk '/internal\/testkit\/controlplane/ {print $$1}' | sort -u)

## e2e: every end-to-end test (real etcd and kube-apiserver), building the control plane and helm first
e2e: controlplane helm
	VERDICT_CONTROLPLANE_BIN=$(CONTROLPLANE_BIN) VERDICT_HELM=$(HELM_BIN) VERDICT_HELM3=$(HELM3_BIN) $(GO) test $(GOFLAGS) -count=1 -timeout 30m $(E2E_PKGS)

## topology: the chart's HA topology run as processes against the local control plane and a three-server JetStream (deploy/helm TestE2ETopology): enforce, audit, generate, cleanup, one replica of each service and the stream leaders killed with SIGKILL
topology: controlplane helm
	VERDICT_CONTROLPLANE_BIN=$(CONTROLPLANE_BIN) VERDICT_HELM=$(HELM_BIN) $(GO) test $(GOFLAGS) -count=1 -timeout 10m -run '^TestE2ETopology$$' -v ./deploy/helm

## controlplane: build etcd, kube-apiserver and kube-controller-manager into .cache (cached)
controlplane:
	./hack/controlplane.sh >/dev/null

## helm: build helm v4 and v3 from their Go modules into .cache/helm and .cache/helm3 (cached; the first build takes a few minutes, and says how long)
helm:
	./hack/helm.sh >/dev/null
	./hack/helm.sh 3 >/dev/null

## chart-crds: copy deploy/crds into the chart: crds/, and report-crds/ for the report CRDs, which templates/reporter/crds.yaml installs in the reporter's CRD mode only (a test fails while they differ)
chart-crds:
	rm -f deploy/helm/verdict/crds/*.yaml deploy/helm/verdict/report-crds/*.yaml
	cp deploy/crds/*.yaml deploy/helm/verdict/crds/
	mv deploy/helm/verdict/crds/policyreports.yaml deploy/helm/verdict/crds/clusterpolicyreports.yaml deploy/helm/verdict/report-crds/

## conformance: run verdict test on the classic policies of ../shared/conformance
conformance: build
	./hack/conformance.sh

## bench: Go benchmarks of the engine hot paths and the apply workload
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/engine/... ./internal/cli/...

# How long each fuzz target runs under `make fuzz`.
FUZZTIME ?= 5s

## fuzz: every Fuzz* target of the repository for FUZZTIME each (5s: about five minutes for the 35 targets; -fuzz takes one target at a time; hack/fuzz.sh)
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./hack/fuzz.sh

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# golangci-lint, built from its Go module (hack/tools/golangci-lint) once,
# cached in .cache.
LINT_BIN = $$(./hack/golangci-lint.sh)

## lint: golangci-lint with .golangci.yaml (built from its pinned module into .cache on first use)
lint:
	./hack/golangci-lint.sh >/dev/null
	$(LINT_BIN) run $(PKGS)

## crds: regenerate deploy/crds/{clusterpolicies,policies,policyexceptions}.yaml from pkg/engine/policy (hack/crdgen), and the chart's copy
crds:
	$(GO) run ./hack/crdgen
	$(MAKE) chart-crds

## verify-crds: fail if the checked-in CRDs differ from what hack/crdgen generates
verify-crds:
	$(GO) run ./hack/crdgen --verify

## verify: formatting, module tidiness, generated CRDs and no large file that is not test data, as CI checks them
verify: verify-crds
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)
	$(GO) mod tidy -diff
	./hack/large-files.sh

## demo: local control plane, embedded JetStream, webhook and reporter, sample policies and Pods, then the reports (DEMO_ONCE=1: once, then exit)
demo: controlplane
	VERDICT_CONTROLPLANE_BIN=$(CONTROLPLANE_BIN) $(GO) run ./cmd/verdict-dev demo $(if $(DEMO_ONCE),--once,)

clean:
	rm -rf $(BIN)
