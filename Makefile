# tierd build and test entry points. "make test" is what CI runs.
GO ?= go
FUZZTIME ?= 10s
SHELL := /bin/bash
HARNESS := ^(TestCrash|TestCrashLeader|TestCrashRemoteCompaction|TestCrashChunked|TestCrashRewrap|TestFaultRate|TestCaseFetchDuringLocalDeletion)$$

.PHONY: build check config-reference test tools unit harness crash faults fuzz vet proto proto-check demo bench bench-full bench-go \
	kafka-rsm kafka-rsm-test kafka-rsm-driver

# -buildvcs=auto: "tierd version" names the Git revision (a go env may turn it off).
build:
	$(GO) build -buildvcs=auto -o bin/tierd ./cmd/tierd

# demo: the main job on the embedded default (filesystem bucket in a temp dir).
demo:
	$(GO) run ./cmd/tierd demo

# bench: "tierd bench" at its defaults against a MinIO it starts (the read
# path in under a minute, the growth cases at small sizes in a few more);
# writes the table to stdout and docs/bench.{json,png}, docs/bench-growth.png.
bench: tools
	$(GO) run ./cmd/tierd bench --json docs/bench.json --plot docs/bench.png

# bench-full: the growth cases at full size (100-10,000 partitions,
# 1,000-100,000 copies, 1-64 readers); hours, each size bounded by
# --case-timeout (30m).
bench-full: tools
	$(GO) run ./cmd/tierd bench --scale full --json docs/bench-full.json --plot docs/bench-full.png

# bench-go: the hot pure functions' benchmarks, each beside its baseline.
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/kafkalog/batch ./internal/kafkalog/index ./grpcapi/... ./remoteread/... ./rsm/chunked/

# tools: the MinIO server the tests run against and grpcurl (the gRPC
# health and reflection tests call it), pinned, once each, cached in ~/.cache/tierd-bin.
tools:
	scripts/install-tools.sh

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

# check: the fast path, before "make test": vet, gofmt, and the unit tests
# of the pure packages (the Kafka formats, the ACL rules, the retention
# planner, the delete protocol and remote compaction on fakes,
# the import layers, tierd.yaml and its generated reference; no MinIO, no
# daemon), in a minute or so.
check: vet
	$(GO) test -count=1 ./internal/... ./rsm/chunked/ ./authz/ ./daemon/statuspage/ ./config/ ./copier/retention/ ./copier/deleter/ ./copier/remotecompact/ ./copier/topics/ ./listener/groups/...
	$(GO) test -count=1 -run '^(TestAuditSample|TestRemoteCounts|TestPartitionStatusOf|TestFailedPartition|TestReporterPass)' ./copier/

# config-reference: rewrite docs/configuration-reference.md from the code
# (config's TestReference fails while the checked-in file is not current).
config-reference:
	$(GO) test -count=1 -run '^TestReference$$' ./config/ -update

# unit: every test with the race detector, but the harness (whose
# concurrency test also runs here, at 150 rounds). Tests skipped for a
# missing outside client (kcat, the Python Kafka clients) append a line
# to $(SKIPS) (internal/testutil/tools.Skip), printed once each after the run:
# "go test" shows nothing but "ok" for a passing package.
SKIPS := $(CURDIR)/.unit-skips
unit:
	@rm -f $(SKIPS)
	TIERD_SKIP_REPORT=$(SKIPS) $(GO) test -count=1 -race -skip '^(TestCrash|TestCrashLeader|TestCrashRemoteCompaction|TestCrashChunked|TestCrashRewrap|TestFaultRate)$$' ./...; s=$$?; \
	  if [ -s $(SKIPS) ]; then sort -u $(SKIPS); fi; rm -f $(SKIPS); exit $$s

# harness: the crash tests (25 kills, the first aimed at each named crash point in turn, which
# fails naming any point not reached; under Kafka leadership 10; remote compaction's 12; of
# chunked, encrypted copies 10; of "tierd keys rewrap" 5), the fault-proxy test (24 copies,
# 250 fetches) over MinIO and the 1000-round fetch-during-deletion test,
# without the race detector; prints their summary lines.
# On a failure it prints the last 150 lines of the whole output (the
# daemon's log that a failing round appends is there).
HARNESS_LOG := $(CURDIR)/.harness.log
harness:
	@set -o pipefail; $(GO) test -count=1 -v -timeout 30m -run '$(HARNESS)' ./e2e/ 2>&1 | tee $(HARNESS_LOG) | \
	  grep -E '^(crash test|leader crash test|remote compaction crash test|chunked crash test|rewrap crash test|fault test|--- |ok|FAIL|PASS|panic)|_test.go'; s=$$?; \
	  if [ $$s -ne 0 ]; then echo "harness failed; the last 150 lines of its output:"; tail -n 150 $(HARNESS_LOG); fi; \
	  rm -f $(HARNESS_LOG); exit $$s

# crash, faults: the same at full count (200 kills, under leadership 66, remote compaction's 60; 100 copies, 1000 fetches).
crash:
	set -o pipefail; TIERD_CRASH_ROUNDS=200 TIERD_COMPACT_CRASH_ROUNDS=60 $(GO) test -count=1 -v -timeout 60m \
	  -run '^(TestCrash|TestCrashLeader|TestCrashRemoteCompaction)$$' ./e2e/ | grep -E '^(crash test|leader crash test|remote compaction crash test|--- |ok|FAIL)|_test.go'

faults:
	set -o pipefail; TIERD_FAULT_SCALE=1 $(GO) test -count=1 -v -timeout 60m -run '^TestFaultRate$$' ./e2e/ | grep -E '^(fault test|--- |ok|FAIL)|_test.go'

fuzz:
	scripts/fuzz.sh $(FUZZTIME)

proto:
	scripts/protoc.sh

proto-check:
	scripts/protoc.sh --check

# kafka-rsm: the broker-side RemoteStorageManager plugin, bin/tierd-kafka-rsm.jar,
# built with the JDK's javac and jar (--release 11); fails if the jar holds a Kafka class.
kafka-rsm:
	kafka-rsm/build.sh jar

# kafka-rsm-test: the plugin's JUnit 5 tests (Debian's junit5) against a fake sidecar,
# with and without Kafka's RetriableRemoteStorageException; fails, never skips, without a JDK.
kafka-rsm-test:
	kafka-rsm/build.sh test

# kafka-rsm-driver: bin/tierd-kafka-rsm-driver.jar (the broker-order driver of the
# end-to-end tests) and the API stand-ins it runs with, bin/kafka-rsm-api-stubs*.jar.
kafka-rsm-driver:
	kafka-rsm/build.sh driver

# test: tools, vet, the plugin's tests, the tests (race detector on), the harness, a bounded fuzz run.
test: tools vet kafka-rsm-test unit harness fuzz
