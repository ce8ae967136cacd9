#!/usr/bin/env bash
# Builds and tests tierd's Kafka RemoteStorageManager plugin with the JDK's own
# javac and jar (no Maven or Gradle). Usage: kafka-rsm/build.sh jar|driver|test
#   jar     bin/tierd-kafka-rsm.jar, checked to hold no org/apache/kafka class
#   driver  bin/tierd-kafka-rsm-driver.jar and the API stand-ins the Go
#           end-to-end test puts on its class path: bin/kafka-rsm-api-stubs.jar
#           (with RetriableRemoteStorageException, as Kafka 4.2+) and
#           bin/kafka-rsm-api-stubs-legacy.jar (without it, as Kafka 3.6-4.1)
#   test    the JUnit 5 tests (Debian's junit5), three runs: with and without
#           RetriableRemoteStorageException on the class path, and the jar
#           linked against the newest interface shape (KIP-1333)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=$here/build
bin=$root/bin
junit=${JUNIT_CONSOLE:-/usr/share/java/junit-platform-console-standalone.jar}
jflags=(--release 11 -Xlint:all -Werror -encoding UTF-8)

need() {
  for t in javac jar java; do
    if ! command -v "$t" >/dev/null; then
      echo "kafka-rsm: $t not found: install a JDK 11 or later (Debian: apt-get install openjdk-17-jdk-headless)" >&2
      exit 1
    fi
  done
}

# compile OUT CLASSPATH SRCDIR... : every .java under the source dirs.
compile() {
  local dest=$1 cp=$2; shift 2
  rm -rf "$dest"; mkdir -p "$dest"
  local srcs; mapfile -t srcs < <(find "$@" -name '*.java' | sort)
  javac "${jflags[@]}" ${cp:+-cp "$cp"} -d "$dest" "${srcs[@]}"
}

stubs() {
  compile "$out/stubs/api" "" "$here/stubs/api"
  compile "$out/stubs/retriable" "$out/stubs/api" "$here/stubs/retriable"
  compile "$out/stubs/kip1333" "$out/stubs/api" "$here/stubs/kip1333"
}

plugin() {
  need
  stubs
  compile "$out/plugin" "$out/stubs/api" "$here/src"
  # The same sources against the newest interface shape (int overloads deprecated defaults, long overloads defaults).
  compile "$out/plugin-kip1333" "$out/stubs/kip1333:$out/stubs/api" "$here/src"
  mkdir -p "$bin"
  rm -f "$bin/tierd-kafka-rsm.jar"
  jar --create --file "$bin/tierd-kafka-rsm.jar" -C "$out/plugin" .
  # Kafka loads the plugin child-first: a bundled Kafka type would not be the broker's.
  local kafka
  kafka=$(jar tf "$bin/tierd-kafka-rsm.jar" | grep -c '^org/apache/kafka' || true)
  if [ "$kafka" != 0 ]; then
    echo "kafka-rsm: bin/tierd-kafka-rsm.jar holds $kafka org/apache/kafka entries; it must hold none" >&2
    exit 1
  fi
  echo "kafka-rsm: wrote bin/tierd-kafka-rsm.jar ($(jar tf "$bin/tierd-kafka-rsm.jar" | grep -c '\.class$') classes, no Kafka class)"
}

driver() {
  plugin
  compile "$out/driver" "$out/stubs/api" "$here/driver"
  rm -f "$bin/tierd-kafka-rsm-driver.jar" "$bin/kafka-rsm-api-stubs.jar" "$bin/kafka-rsm-api-stubs-legacy.jar"
  jar --create --file "$bin/tierd-kafka-rsm-driver.jar" --main-class io.tierd.kafka.driver.BrokerDriver -C "$out/driver" .
  jar --create --file "$bin/kafka-rsm-api-stubs.jar" -C "$out/stubs/api" . -C "$out/stubs/retriable" .
  jar --create --file "$bin/kafka-rsm-api-stubs-legacy.jar" -C "$out/stubs/api" .
  echo "kafka-rsm: wrote bin/tierd-kafka-rsm-driver.jar, bin/kafka-rsm-api-stubs.jar, bin/kafka-rsm-api-stubs-legacy.jar"
}

# run NAME EXPECT_RETRIABLE CLASSPATH SELECTOR... : one JUnit run; appends its counts to $summary.
run() {
  local name=$1 retriable=$2 cp=$3; shift 3
  local log="$out/junit-$name.log" rc=0
  java -Dtierd.test.expectRetriable="$retriable" -Dtierd.fixtures="$fixtures" -Dtierd.ci="${CI:-}" \
    -Dtierd.bin="$bin" -jar "$junit" --disable-banner --disable-ansi-colors --details=summary \
    --class-path "$cp" "$@" >"$log" 2>&1 || rc=$?
  # Failures are printed whole; a passing run prints only its counts.
  if [ $rc != 0 ]; then cat "$log"; fi
  count() { sed -n "s/.*\[ *\([0-9]*\) tests $1 *\].*/\1/p" "$log"; }
  local found succ failed skipped aborted
  found=$(count found) succ=$(count successful) failed=$(count failed) skipped=$(count skipped) aborted=$(count aborted)
  skipped=$(( ${skipped:-0} + ${aborted:-0} ))
  summary+=$(printf '\n  %-44s %4s tests, %4s passed, %4s failed, %3s skipped' \
    "$name" "${found:-?}" "${succ:-?}" "${failed:-?}" "$skipped")
  if [ $rc != 0 ] || [ "${found:-0}" = 0 ]; then status=1; fi
}

test() {
  need
  if [ ! -r "$junit" ]; then
    echo "kafka-rsm: $junit not found: install Debian's junit5 (apt-get install junit5) or set JUNIT_CONSOLE" >&2
    exit 1
  fi
  driver
  fixtures=${TIERD_FIXTURES:-$(cd "$root/.." && pwd)/shared/fixtures/real}
  local jar=$bin/tierd-kafka-rsm.jar
  # Tests may use Java 17; they only run on the JDK here. The plugin and driver stay --release 11.
  jflags=(--release 17 -Xlint:all -Werror -encoding UTF-8)
  compile "$out/test" "$junit:$out/stubs/api:$jar:$out/driver" "$here/test"
  compile "$out/test-kip1333" "$junit:$out/stubs/kip1333:$out/stubs/api:$jar:$out/test" "$here/test-kip1333"
  summary="" status=0
  run "with RetriableRemoteStorageException" true \
    "$out/test:$jar:$out/driver:$out/stubs/api:$out/stubs/retriable" --scan-class-path "$out/test"
  run "without RetriableRemoteStorageException" false \
    "$out/test:$jar:$out/driver:$out/stubs/api" --scan-class-path "$out/test"
  run "jar linked against the KIP-1333 interface" true \
    "$out/test-kip1333:$out/test:$jar:$out/stubs/kip1333:$out/stubs/api:$out/stubs/retriable" --scan-class-path "$out/test-kip1333"
  echo "kafka-rsm tests (logs in kafka-rsm/build/junit-*.log):$summary"
  if [ $status != 0 ]; then echo "kafka-rsm tests: FAILED" >&2; exit 1; fi
}

case "${1:-}" in
  jar) plugin ;;
  driver) driver ;;
  test) test ;;
  *) echo "usage: $0 jar|driver|test" >&2; exit 2 ;;
esac
