# Switchyard — `make run` builds everything and starts the gateway; `make test` runs every test.
SHELL := /bin/bash
GO ?= go
BIN := bin/switchyard
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
GOFILES := $(shell find . -name '*.go' -not -path './node_modules/*' 2>/dev/null)
TEMPL := $(shell find views -name '*.templ')

.PHONY: all run build test test-short generate assets lint fmt fuzz bench clean

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

## bench: gateway overhead against a bare reverse proxy, separate processes on 127.0.0.1 (~10 min;
## not part of make test). Knobs: BENCH_* environment variables, see bench/bench_test.go. Writes docs/bench/latest.{md,json}.
bench: assets generate
	CGO_ENABLED=1 $(GO) test -tags bench -run '^TestBench$$' -count=1 -timeout 30m -v ./bench

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
