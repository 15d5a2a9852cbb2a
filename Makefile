# Switchyard — `make run` builds everything and starts the gateway; `make test` runs every test.
SHELL := /bin/bash
GO ?= go
BIN := bin/switchyard
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
GOFILES := $(shell find . -name '*.go' -not -path './node_modules/*' 2>/dev/null)
TEMPL := $(shell find views -name '*.templ')

.PHONY: all run build test test-postgres test-short generate assets lint fmt fuzz bench bench-store clean

all: build

## assets: install the pinned front-end packages and copy them into static/dist
assets: static/dist/js/htmx.min.js

static/dist/js/htmx.min.js: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	npm run -s build

## generate: regenerate templ components (the generated files are committed)
generate:
	$(GO) tool templ generate

## build: the gateway binary
build: assets generate
	CGO_ENABLED=1 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) .

## run: build and start the gateway on ./data (SQLite)
run: build
	./$(BIN) serve

## test: every test, with the race detector
test: assets generate
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 15m ./...

## test-postgres: the tests of every package that keeps data (services, web, e2e) once more with
## a private PostgreSQL as the store instead of SQLite (~12 min; CI runs it after make test).
test-postgres: assets generate
	SWITCHYARD_TEST_STORE=postgres CGO_ENABLED=1 $(GO) test -count=1 -timeout 30m ./services/... ./web/... ./e2e/...

## bench: gateway overhead against a bare reverse proxy, separate processes on 127.0.0.1 (~10 min;
## not part of make test). Knobs: BENCH_* environment variables, see bench/bench_test.go. Writes docs/bench/latest.{md,json}.
bench: assets generate
	CGO_ENABLED=1 $(GO) test -tags bench -run '^TestBench$$' -count=1 -timeout 30m -v ./bench

## bench-store: the native rows of the benchmark twice, on the SQLite file and on a private
## PostgreSQL (~6 min); writes docs/bench/store-sqlite.md and docs/bench/store-postgres.md.
BENCH_STORE_KNOBS = BENCH_SURFACES=none BENCH_MAXRATE_STEPS=0 BENCH_SLOW_STREAMS=0 BENCH_SLOW_H2_STREAMS=0 BENCH_PLATEAU_RATE=0 BENCH_PLATEAU_SAMPLES=3
bench-store: assets generate
	for s in sqlite postgres; do \
		d=$$(mktemp -d) && \
		$(BENCH_STORE_KNOBS) BENCH_STORE=$$s BENCH_OUT_DIR=$$d CGO_ENABLED=1 $(GO) test -tags bench -run '^TestBench$$$$' -count=1 -timeout 30m -v ./bench && \
		cp $$d/latest.md docs/bench/store-$$s.md && cp $$d/latest.json docs/bench/store-$$s.json || exit 1; \
	done

## fuzz: run every fuzz target briefly (FUZZTIME each); the seed corpora also run in make test.
## Go 1.26's fuzzing coordinator can end a run bounded by time with a bare "context deadline
## exceeded" failure as the time runs out, having found nothing (golang/go#75804, fixed in Go
## 1.27). Such a run wrote no failing input and is run once more; a run that found a failing
## input (the toolchain writes it to testdata/fuzz) always fails.
FUZZTIME ?= 10s
fuzz: assets generate
	@set -eo pipefail; log=$$(mktemp); trap 'rm -f $$log' EXIT; \
	for pkg in ./services/proxy ./services/proxy/convo ./services/proxy/convo/chat ./services/proxy/convo/messages ./services/proxy/convo/responses ./services/proxy/tokencount ./services/resilience ./services/settings; do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    for try in 1 2; do \
	      echo "fuzz $$pkg $$f"; \
	      if $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1 | tee $$log; then break; fi; \
	      if [ $$try = 1 ] && grep -qx '    context deadline exceeded' $$log && ! grep -q 'Failing input written' $$log; then \
	        echo "fuzz $$f: the toolchain's deadline race (golang/go#75804), no failing input found; running it once more"; \
	      else exit 1; fi; \
	    done; \
	  done; \
	done

## lint: formatting, vet, and that generated templ files are fresh
lint: assets
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$'))" || (gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$'); echo 'gofmt needed'; exit 1)
	$(GO) vet ./...
	$(GO) tool templ fmt -fail views
	$(GO) tool templ generate
	@git diff --exit-code -- '*_templ.go' || (echo 'generated templ files are stale: run make generate and commit'; exit 1)

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '_templ.go$$')
	$(GO) tool templ fmt views

clean:
	rm -rf bin static/dist/js node_modules

## static: bin/switchyard-static, linked statically for the container image (Containerfile),
## which is FROM scratch: no libc, no NSS, no zoneinfo. SQLite needs cgo, so glibc is linked in;
## netgo and osusergo keep Go off glibc's NSS (getaddrinfo, getpwnam), which cannot work in a
## static binary; sqlite_omit_load_extension drops SQLite's dlopen for the same reason; timetzdata
## embeds the zone database, as the price schedules name IANA zones (time.LoadLocation).
STATIC_BIN := bin/switchyard-static
STATIC_TAGS := osusergo netgo sqlite_omit_load_extension timetzdata
.PHONY: static image
static: assets generate
	CGO_ENABLED=1 $(GO) build -trimpath -tags '$(STATIC_TAGS)' \
	  -ldflags '$(LDFLAGS) -s -w -linkmode external -extldflags "-static"' -o $(STATIC_BIN) .
	@if ldd $(STATIC_BIN) >/dev/null 2>&1; then echo "$(STATIC_BIN) is dynamically linked"; exit 1; fi
	./$(STATIC_BIN) version

## image: the container image switchyard:latest (Containerfile) from bin/switchyard-static, the
## host's CA bundle (CA_BUNDLE) and the image's directories, staged in bin/image/. Every stage
## is FROM scratch and only copies, so the build pulls nothing and runs nothing: no registry, no
## container runtime, no network. /tmp is staged as a child of the copied tree because COPY
## keeps the mode of what it copies but not of the directory it copies into.
## PODMAN may carry global options where podman's defaults do not work, e.g.
## PODMAN='podman --storage-driver vfs' on a file system without overlay support.
IMAGE ?= switchyard:latest
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt
PODMAN ?= podman
image: static
	rm -rf bin/image
	mkdir -p bin/image/rootfs/etc/ssl/certs bin/image/rootfs/tmp bin/image/data
	chmod 1777 bin/image/rootfs/tmp
	cp $(CA_BUNDLE) bin/image/rootfs/etc/ssl/certs/ca-certificates.crt
	$(PODMAN) build --pull=never -f Containerfile -t $(IMAGE) .
	$(PODMAN) image inspect $(IMAGE) --format '$(IMAGE): {{.Size}} bytes'
