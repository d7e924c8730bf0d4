# Shared by the commands in bin/: builds what is missing and runs a main class with Spark on the
# class path. Source it; do not run it.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# ensure_built MODULE: packages the project (tests skipped) if MODULE's jar or class path is missing.
ensure_built() {
  local module="$1"
  if ! ls "$ROOT/$module"/target/"$module"-*.jar >/dev/null 2>&1 || [ ! -f "$ROOT/$module/target/classpath.txt" ]; then
    echo "Building the project (first run; tests skipped)..." >&2
    (cd "$ROOT" && mvn -B -q -ntp -DskipTests install) || { echo "build failed" >&2; exit 1; }
  fi
}

# run_main MODULE CLASS ARGS...: runs CLASS from MODULE's jar with its class path and Spark's JVM flags.
run_main() {
  local module="$1" cls="$2"; shift 2
  ensure_built "$module"
  local jar cp opts
  jar=$(ls "$ROOT/$module"/target/"$module"-*.jar | grep -v -e sources -e tests -e -all.jar | head -1)
  cp="$jar:$(cat "$ROOT/$module/target/classpath.txt")"
  opts=$(cat "$ROOT/$module/target/jvm-options.txt")
  # shellcheck disable=SC2086
  exec java $opts -Dlog4j2.configurationFile="$ROOT/bin/log4j2.properties" ${JAVA_OPTS:-} -cp "$cp" "$cls" "$@"
}

# test_classpath MODULE: compiles MODULE's tests if needed and prints its test class path (for the
# benchmarks, which live with the tests they share data generators with).
test_classpath() {
  local module="$1" cpfile="$ROOT/$1/target/test-classpath.txt"
  if [ ! -d "$ROOT/$module/target/test-classes" ] || [ ! -f "$cpfile" ] \
     || [ -n "$(find "$ROOT/$module/src" -newer "$cpfile" -name '*.java' -print -quit)" ]; then
    echo "Building $module and its tests (first run)..." >&2
    # One reactor build: the class path then points at this checkout's modules, not at ~/.m2.
    (cd "$ROOT" && mvn -B -q -ntp -DskipTests -pl "$module" -am install dependency:build-classpath \
           -Dmdep.includeScope=test -Dmdep.outputFile="$cpfile" >&2) || { echo "build failed" >&2; exit 1; }
  fi
  echo "$ROOT/$module/target/test-classes:$ROOT/$module/target/classes:$(cat "$cpfile")"
}
