# IronCurtain for Go. `make` (or `make help`) lists the targets; `make test` is what CI runs.
#
# Works on a standard workstation (Docker Compose v2, BuildKit, a registry) and on a machine
# with only the classic builder, the `docker-compose` v1 tool and no registry: there the
# images are built from Debian's packages (images/offline). See docs/development.md.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
MAKEFLAGS += --no-print-directory

# The Go command: `go` when Go >= 1.26 is on PATH, else the pinned toolchain that
# scripts/prereqs.sh installs (memoised: looked up once, when first used).
GO ?= $(go_cmd)
go_cmd = $(eval go_cmd := $(shell scripts/prereqs.sh go-path))$(go_cmd)
GOFMT ?= $(if $(filter go,$(GO)),gofmt,$(dir $(GO))gofmt)
# Modules of go.work. e2e runs separately (test-e2e): it needs the images first.
MODULES := agent compiler gateway migrations e2e
GO_MODULES := agent compiler gateway migrations
PKGS := $(foreach m,$(GO_MODULES),./$(m)/...)
BIN_DIR := build/bin
# Only packages under */cmd/* become binaries (ironcurtain, ironcurtain-agent, ironcurtain-compile).
CMD_PKGS := ./gateway/cmd/... ./agent/cmd/... ./compiler/cmd/...
# The build every binary reports (`<binary> version`, /healthz, ironcurtain_build_info):
# stamped at link time, since builds in the go.work workspace and Docker contexts without
# .git carry no VCS information. -X of a package a binary does not link is ignored.
BUILD_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
BUILD_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_LDFLAGS = $(foreach p,gateway/buildinfo agent/internal/buildinfo,-X ironcurtain.dev/$(p).version=$(BUILD_VERSION) -X ironcurtain.dev/$(p).revision=$(BUILD_REVISION))
PGTEST_PKG := ironcurtain.dev/gateway/internal/store/pgtest
# Label pgtest puts on its Postgres containers, with the owning process id.
PGTEST_LABEL := dev.ironcurtain.pgtest
# Label the e2e suite puts on its containers, networks and volumes (with the test process id).
E2E_LABEL := dev.ironcurtain.e2e

# Extra flags for every `go test` (e.g. GOTESTFLAGS=-count=1 or -v).
GOTESTFLAGS ?=
TEST_TIMEOUT ?= 20m
E2E_TIMEOUT ?= 30m
# fuzz: regexp on "dir FuzzName" and time per fuzzer; bench: regexp and time per benchmark.
FUZZ ?= .
FUZZTIME ?= 10s
BENCH ?= .
BENCHTIME ?= 200ms

# Images. OFFLINE=auto: offline images when no registry answers (images/offline/detect.sh,
# run at most once, and only by targets that need images); OFFLINE=1 forces them;
# OFFLINE=0 uses the standard images.
OFFLINE ?= auto
# Tags of the offline images (other tags: e.g. to time a build from scratch without
# removing the images other runs use).
OFFLINE_BASE_IMAGE ?= ironcurtain/base-offline:bookworm
OFFLINE_POSTGRES_IMAGE ?= ironcurtain/postgres-offline:15
OFFLINE_BUILD = OFFLINE_BASE_IMAGE=$(OFFLINE_BASE_IMAGE) OFFLINE_POSTGRES_IMAGE=$(OFFLINE_POSTGRES_IMAGE) images/offline/build.sh
STANDARD_BASE_IMAGE := debian:bookworm-slim
STANDARD_POSTGRES_IMAGE := postgres:16

ifeq ($(OFFLINE),auto)
# Memoised: the probe runs on first use only.
offline_probe = $(eval offline_probe := $(shell images/offline/detect.sh))$(offline_probe)
offline = $(firstword $(offline_probe))
offline_why = OFFLINE=auto: $(wordlist 2,100,$(offline_probe))
else ifeq ($(OFFLINE),1)
offline := 1
offline_why := OFFLINE=1
else ifeq ($(OFFLINE),0)
offline := 0
offline_why := OFFLINE=0
else
$(error OFFLINE must be auto, 1 or 0, not "$(OFFLINE)")
endif

BASE_IMAGE ?= $(if $(filter 1,$(offline)),$(OFFLINE_BASE_IMAGE),$(STANDARD_BASE_IMAGE))
IC_POSTGRES_IMAGE ?= $(if $(filter 1,$(offline)),$(OFFLINE_POSTGRES_IMAGE),$(STANDARD_POSTGRES_IMAGE))

# The gateway and agent images (images/build.sh). PREBUILT=1 copies the host's static
# binaries (make build) into them: the default offline, where containers cannot reach the
# Go module proxy; PREBUILT=0 compiles in a golang builder stage (the workstation default).
GATEWAY_IMAGE ?= ironcurtain/gateway:dev
AGENT_IMAGE ?= ironcurtain/agent:dev
# The agent shell (images/agent-shell, docs/agents.md): Debian packages through apt-get.
AGENT_SHELL_IMAGE ?= ironcurtain/agent-shell:dev
PREBUILT ?= $(offline)
IMAGE_CMD_PKGS := ./gateway/cmd/ironcurtain ./agent/cmd/ironcurtain-agent

# Server images (images/servers, docs/tools.md "image: mode"): the Debian variants run a
# script baked in (no registry needed; the e2e suite's Node and Python echo servers).
NODE_SERVER_IMAGE ?= ironcurtain/mcp-echo-node:dev
PYTHON_SERVER_IMAGE ?= ironcurtain/mcp-echo-python:dev

# What the Postgres integration tests (gateway/internal/store/pgtest) read. Ryuk, the
# testcontainers reaper, cannot be pulled without a registry; pgtest cleans up itself.
TEST_ENV = IC_POSTGRES_IMAGE=$(IC_POSTGRES_IMAGE) IC_BASE_IMAGE=$(BASE_IMAGE) TESTCONTAINERS_RYUK_DISABLED=true
# The e2e suite also needs the images it tests.
E2E_ENV = $(TEST_ENV) IC_GATEWAY_IMAGE=$(GATEWAY_IMAGE) IC_AGENT_IMAGE=$(AGENT_IMAGE) IC_AGENT_SHELL_IMAGE=$(AGENT_SHELL_IMAGE) \
	IC_NODE_SERVER_IMAGE=$(NODE_SERVER_IMAGE) IC_PYTHON_SERVER_IMAGE=$(PYTHON_SERVER_IMAGE)

# `docker compose` (v2 plugin) when it works, else the v1 `docker-compose` tool.
COMPOSE ?= $(shell if docker compose version >/dev/null 2>&1; then echo 'docker compose'; \
	elif command -v docker-compose >/dev/null 2>&1; then echo docker-compose; fi)

# The packages whose tests use the Postgres harness (directly or through a helper).
# Computed by the targets that need it, never at parse time.
define integration_pkgs
$(GO) list -test -f '{{if .ForTest}}{{.ForTest}} {{.ImportPath}} {{join .Deps " "}}{{end}}' $(PKGS) \
	| awk '$$1 == "$(PGTEST_PKG)" || / $(subst /,\/,$(subst .,\.,$(PGTEST_PKG)))( |$$)/ { print $$1 }' | sort -u
endef

.PHONY: help
help: ## list the targets (default)
	@echo "usage: make <target> [VAR=value]"
	@echo
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z0-9_.-]+:.*## / { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@echo
	@echo "variables: OFFLINE=auto|1|0  GOTESTFLAGS=  FUZZ=$(FUZZ)  FUZZTIME=$(FUZZTIME)  BENCH=$(BENCH)  BENCHTIME=$(BENCHTIME)  FORCE=1 (images)"
	@echo "           GATEWAY_IMAGE=$(GATEWAY_IMAGE)  AGENT_IMAGE=$(AGENT_IMAGE)  PREBUILT=1|0  COMPOSE=$(COMPOSE)  ID= (approve, deny)"

.PHONY: build
build: ## build every command that exists into build/bin/ (static, CGO_ENABLED=0)
	@mkdir -p $(BIN_DIR)
	@cmds=$$($(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' $(CMD_PKGS) 2>/dev/null | grep /cmd/ || true); \
	if [ -z "$$cmds" ]; then echo "build: no command packages yet" >&2; exit 1; fi; \
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(BUILD_LDFLAGS)' -o $(BIN_DIR)/ $$cmds; \
	for c in $$cmds; do echo "built $(BIN_DIR)/$${c##*/}"; done

.PHONY: test
test: prereqs-test lint test-unit test-integration test-e2e ## everything CI runs: lint, all module tests with -race (Postgres included), e2e

.PHONY: prereqs-test prereqs-up
prereqs-test: ## install what `make test` needs when missing (scripts/prereqs.sh: packages, Go, Docker)
	@scripts/prereqs.sh test
prereqs-up: ## install what `make up` needs when missing (the same, and a Docker daemon is required)
	@scripts/prereqs.sh up

.PHONY: lint
lint: ## gofmt check, go vet, and every module builds, vets and is tidy on its own (GOWORK=off)
	@unformatted=$$($(GOFMT) -l $(MODULES)); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	@failed=; for m in $(MODULES); do \
		echo "go vet, go mod tidy -diff ($$m, GOWORK=off)"; \
		(cd $$m && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) mod tidy -diff) || failed="$$failed $$m"; \
	done; \
	if [ -n "$$failed" ]; then echo "lint: go vet or go mod tidy -diff failed in:$$failed" >&2; exit 1; fi
	@if command -v staticcheck >/dev/null; then echo staticcheck; staticcheck $(foreach m,$(MODULES),./$(m)/...); fi

.PHONY: test-unit
test-unit: base-image ## tests of every module with -race, except the packages that need Postgres (the launcher's Docker test builds on the base image)
	@ipkgs=$$($(integration_pkgs)); \
	upkgs=$$($(GO) list $(PKGS) | awk 'NR == FNR { skip[$$0] = 1; next } !skip[$$0]' <(printf '%s\n' $$ipkgs) -); \
	$(TEST_ENV) $(GO) test -race -timeout $(TEST_TIMEOUT) $(GOTESTFLAGS) $$upkgs

.PHONY: test-integration
test-integration: postgres-image ## tests of the packages that use the Postgres harness (real Postgres, -race)
	@ipkgs=$$($(integration_pkgs)); \
	if [ -z "$$ipkgs" ]; then \
		if $(GO) list $(PGTEST_PKG) >/dev/null 2>&1; then echo "test-integration: no package uses $(PGTEST_PKG)" >&2; exit 1; fi; \
		echo "test-integration: no Postgres harness yet ($(PGTEST_PKG))"; exit 0; \
	fi; \
	echo "test-integration: $(TEST_ENV)"; \
	$(TEST_ENV) $(GO) test -race -timeout $(TEST_TIMEOUT) $(GOTESTFLAGS) $$ipkgs

.PHONY: test-e2e
test-e2e: ## the end-to-end suite against the real images (builds them first; never cached)
	@$(MAKE) images server-images OFFLINE=$(offline); \
	$(E2E_ENV) $(GO) test -count=1 -timeout $(E2E_TIMEOUT) $(GOTESTFLAGS) ./e2e/...

.PHONY: screenshots
screenshots: ## refresh docs/console/*.png: the e2e console test (headless Chromium) writes them there (test runs use a temp dir)
	@$(MAKE) images OFFLINE=$(offline); \
	$(E2E_ENV) IC_E2E_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -timeout $(E2E_TIMEOUT) $(GOTESTFLAGS) -run '^TestConsole$$' ./e2e

.PHONY: fuzz
fuzz: ## run every fuzzer (or those matching FUZZ=regexp) for FUZZTIME (default 10s), one at a time
	@found=0; \
	for dir in $$(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' $(MODULES) | xargs -r -n1 dirname | sort -u); do \
		for fz in $$(grep -hoE '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | cut -d' ' -f2 | sort -u); do \
			grep -qE -- '$(FUZZ)' <<<"$$dir $$fz" || continue; \
			found=1; echo "== ./$$dir $$fz ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$fz\$$" -fuzztime $(FUZZTIME) ./$$dir || exit 1; \
		done; \
	done; \
	if [ $$found = 0 ]; then echo "fuzz: no fuzzer matches '$(FUZZ)'"; fi

.PHONY: bench
bench: ## run the benchmarks (BENCH=regexp, BENCHTIME=200ms) with allocation counts
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -benchmem $(GOTESTFLAGS) $(PKGS)

.PHONY: bench-compare
bench-compare: ## hot-path benchmarks of this tree against the pinned baseline (scripts/bench-baseline; BASE=commit, REPS=5, BENCH_FILTER=regexp, BENCH_FAIL=1), interleaved, one table
	@GO=$(GO) scripts/bench-compare.sh

.PHONY: bench-mcp-load
bench-mcp-load: ## audited MCP write_file calls/s through the gateway binary, 1 and 256 sessions, Postgres, this tree vs scripts/bench-baseline (BASE=commit, BENCH_MCP_ARGS); not part of test
	@GO=$(GO) scripts/bench-mcp-load.sh

.PHONY: bench-egress
bench-egress: ## egress proxy side by side: direct, ours, a bare relay, smokescreen (pinned, built in a temp dir), Squid (docs/egress.md); not part of test
	@scripts/prereqs.sh bench-egress
	@GO=$(GO) scripts/bench-egress.sh

.PHONY: images-mode
images-mode: ## say which images this machine uses (offline or standard) and why
	@echo "images: $(if $(filter 1,$(offline)),offline,standard) ($(offline_why)); base $(BASE_IMAGE), postgres $(IC_POSTGRES_IMAGE)"

.PHONY: images-offline
images-offline: prereqs-test ## build the offline base and Postgres images from Debian packages (cached; FORCE=1 rebuilds)
	@$(OFFLINE_BUILD) all

.PHONY: postgres-image
postgres-image: prereqs-test images-mode ## make the Postgres image for the integration tests available
	@if [ "$(offline)" = 1 ]; then $(OFFLINE_BUILD) all; \
	else docker image inspect $(IC_POSTGRES_IMAGE) >/dev/null 2>&1 || docker pull $(IC_POSTGRES_IMAGE); fi

.PHONY: base-image
base-image: postgres-image ## make the base image (offline or standard) available: the launcher's Docker test builds its test server on it
	@if [ "$(offline)" != 1 ]; then docker image inspect $(BASE_IMAGE) >/dev/null 2>&1 || docker pull $(BASE_IMAGE); fi

.PHONY: images
images: postgres-image ## every image the stack and e2e need: Postgres, gateway, agent and agent-shell (cached; FORCE=1 rebuilds all)
	@if [ "$(offline)" != 1 ]; then docker image inspect $(BASE_IMAGE) >/dev/null 2>&1 || docker pull $(BASE_IMAGE); fi
	@if [ "$(PREBUILT)" = 1 ]; then $(MAKE) build CMD_PKGS="$(IMAGE_CMD_PKGS)"; fi
	@BASE_IMAGE=$(BASE_IMAGE) PREBUILT=$(PREBUILT) GATEWAY_IMAGE=$(GATEWAY_IMAGE) AGENT_IMAGE=$(AGENT_IMAGE) \
		BUILD_VERSION=$(BUILD_VERSION) BUILD_REVISION=$(BUILD_REVISION) \
		AGENT_SHELL_IMAGE=$(AGENT_SHELL_IMAGE) images/build.sh all

# Images for third-party MCP servers in image: mode (images/servers; not part of `images`:
# `make up` needs none). server-images: Debian's nodejs / python3 on the base image running
# the echo scripts of images/servers/testdata (works without a registry; e2e runs them).
# server-image: an npm or PyPI package at an exact version on node:22-slim / python:3.12-slim
# (needs a registry: refused when `make images-mode` says offline).
.PHONY: server-images
server-images: base-image ## the Node and Python server images on the base image with Debian's runtimes (the e2e echo servers; cached, FORCE=1 rebuilds)
	@BASE_IMAGE=$(BASE_IMAGE) NODE_SERVER_IMAGE=$(NODE_SERVER_IMAGE) PYTHON_SERVER_IMAGE=$(PYTHON_SERVER_IMAGE) \
		FORCE=$(FORCE) images/servers/build.sh debian

.PHONY: server-image
server-image: images-mode ## an npx/uvx server's image: RUNTIME=node|python PACKAGE=<name> VERSION=<exact> [BIN= TAG= REGISTRY=] (needs a registry)
	@case "$(RUNTIME)" in node|python) ;; *) echo 'make server-image: RUNTIME=node or RUNTIME=python' >&2; exit 2;; esac
	@if [ "$(offline)" = 1 ]; then echo "make server-image: $(RUNTIME) packages come from a registry and this machine has none ($(offline_why)); make server-images builds the Debian variants, and docs/tools.md says how to bake a script into one" >&2; exit 1; fi
	@PACKAGE="$(PACKAGE)" VERSION="$(VERSION)" BIN="$(BIN)" TAG="$(TAG)" REGISTRY="$(REGISTRY)" images/servers/build.sh $(RUNTIME)

# The Compose stack (compose/): the Makefile's image choice, and the detected COMPOSE.
STACK = COMPOSE="$(COMPOSE)" IC_GATEWAY_IMAGE=$(GATEWAY_IMAGE) IC_AGENT_IMAGE=$(AGENT_IMAGE) IC_AGENT_SHELL_IMAGE=$(AGENT_SHELL_IMAGE) \
	IC_POSTGRES_IMAGE=$(IC_POSTGRES_IMAGE) compose/stack.sh

.PHONY: compose-check
compose-check:
	@if [ -z "$(COMPOSE)" ]; then echo "neither 'docker compose' nor 'docker-compose' works: install one (COMPOSE=... to choose)" >&2; exit 1; fi

.PHONY: up
up: prereqs-up compose-check ## start the stack (postgres, migrate, gateway) and the offline demo agent; print its escalation
	@compose/stack.sh env
	@$(MAKE) images
	@$(STACK) up

.PHONY: demo
demo: up ## make up, then approve the demo's escalation, wait for the agent and show its output and audit trail
	@$(STACK) demo

.PHONY: run
run: compose-check ## run an agent on TASK="..." in its own session against the running stack (ARGS="--agent shell" etc., docs/run.md)
	@if [ -z "$(TASK)" ] && [ -z "$(ARGS)" ]; then echo 'make run: set TASK="..." (and ARGS= for flags such as --agent shell or --interactive)' >&2; exit 2; fi
	@mkdir -p $(BIN_DIR)
	@CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN_DIR)/ ./gateway/cmd/ironcurtain
	@IC_AGENT_IMAGE=$(AGENT_IMAGE) IC_AGENT_SHELL_IMAGE=$(AGENT_SHELL_IMAGE) $(BIN_DIR)/ironcurtain run $(ARGS) $(if $(TASK),"$(TASK)")

.PHONY: down
down: compose-check ## stop the stack and remove its containers and networks (VOLUMES=1: its data too)
	@$(STACK) down

.PHONY: escalations
escalations: compose-check ## list escalations of the running stack (ARGS="--status all" for every one)
	@$(STACK) escalations $(or $(ARGS),--status pending)

.PHONY: approve
approve: compose-check ## approve escalation ID=<id> as the operator (REASON="..." optional)
	@$(STACK) approve "$(ID)" $(if $(REASON),--reason "$(REASON)")

.PHONY: deny
deny: compose-check ## deny escalation ID=<id> as the operator (REASON="..." optional)
	@$(STACK) deny "$(ID)" $(if $(REASON),--reason "$(REASON)")

.PHONY: logs
logs: compose-check ## follow a service's logs (SERVICE=agent|gateway|postgres|migrate, default agent)
	@$(STACK) logs $(or $(SERVICE),agent)

.PHONY: audit
audit: compose-check ## the audit trail of the demo session (tool calls with decisions and outcomes)
	@$(STACK) audit

.PHONY: clean
clean: ## remove build/ and test containers, networks and volumes whose test process is gone (images stay)
	rm -rf build
	@for id in $$(docker ps -aq --filter label=$(PGTEST_LABEL) 2>/dev/null); do \
		pid=$$(docker inspect --format '{{index .Config.Labels "$(PGTEST_LABEL).pid"}}' $$id); \
		if [ -n "$$pid" ] && kill -0 "$$pid" 2>/dev/null; then echo "keeping $$id (test process $$pid runs)"; continue; fi; \
		docker rm -f -v $$id >/dev/null && echo "removed test container $$id"; \
	done
	@for kind in container network volume; do \
		case $$kind in container) list="docker ps -aq"; labels=.Config.Labels; rm="docker rm -f -v";; \
			*) list="docker $$kind ls -q"; labels=.Labels; rm="docker $$kind rm";; esac; \
		for id in $$($$list --filter label=$(E2E_LABEL) 2>/dev/null); do \
			pid=$$(docker $$kind inspect --format "{{index $$labels \"$(E2E_LABEL).pid\"}}" $$id); \
			if [ -n "$$pid" ] && kill -0 "$$pid" 2>/dev/null; then echo "keeping e2e $$kind $$id (test process $$pid runs)"; continue; fi; \
			$$rm $$id >/dev/null && echo "removed e2e $$kind $$id"; \
		done; \
	done

.PHONY: clean-images
clean-images: ## remove the images make builds: gateway, agent, agent-shell, offline Postgres and base (rebuilt by the next make images)
	-docker image rm $(GATEWAY_IMAGE) $(AGENT_IMAGE) $(AGENT_SHELL_IMAGE) $(OFFLINE_POSTGRES_IMAGE) $(OFFLINE_BASE_IMAGE)
