# tierd build and test entry points. "make test" is what CI runs.
GO ?= go
FUZZTIME ?= 10s

.PHONY: build test unit fuzz vet

build:
	$(GO) build -o bin/tierd ./cmd/tierd

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

unit:
	$(GO) test -count=1 -race ./...

fuzz:
	scripts/fuzz.sh $(FUZZTIME)

# test: vet, every test (with the race detector), then a bounded fuzz run.
test: vet unit fuzz
