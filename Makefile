# tierd build and test entry points. "make test" is what CI runs.
GO ?= go
FUZZTIME ?= 10s

.PHONY: build test tools unit fuzz vet proto proto-check demo

build:
	$(GO) build -o bin/tierd ./cmd/tierd

# demo: the main job on the embedded default (filesystem bucket in a temp dir).
demo:
	$(GO) run ./cmd/tierd demo

# tools: the MinIO server the tests run against (once, cached in ~/.cache/tierd-bin).
tools:
	scripts/install-tools.sh

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

unit:
	$(GO) test -count=1 -race ./...

fuzz:
	scripts/fuzz.sh $(FUZZTIME)

proto:
	scripts/protoc.sh

proto-check:
	scripts/protoc.sh --check

# test: tools, vet, every test (race detector on), then a bounded fuzz run.
test: tools vet unit fuzz
