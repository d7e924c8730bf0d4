# Shared by the commands in bin/: builds what is missing and runs a main class with Spark on the
# class path. Source it; do not run it.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# quiet_build MAVEN_ARGS...: runs Maven in $ROOT with its output (compiler warnings, downloads) in
# target/build.log; on failure prints the log's last 40 lines and stops.
quiet_build() {
  mkdir -p "$ROOT/target"
  if ! (cd "$ROOT" && mvn -B -ntp "$@") > "$ROOT/target/build.log" 2>&1; then
    tail -n 40 "$ROOT/target/build.log" >&2
    echo "build failed (the whole log: $ROOT/target/build.log)" >&2
    exit 1
  fi
}

# ensure_built MODULE: packages the project (tests skipped) if MODULE's jar or class path is missing.
ensure_built() {
  local module="$1"
  if ! ls "$ROOT/$module"/target/"$module"-*.jar >/dev/null 2>&1 || [ ! -f "$ROOT/$module/target/classpath.txt" ]; then
    echo "Building the project (first run; tests skipped; log: target/build.log)..." >&2
    quiet_build -DskipTests install
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
  # libtorch's own warnings (e.g. "AutoNonVariableTypeMode is deprecated", printed from DJL's native
  # calls) say nothing a user can act on: errors only, unless --verbose or the caller chose a level.
  case " $* " in
    *" --verbose "*) ;;
    *) export TORCH_CPP_LOG_LEVEL="${TORCH_CPP_LOG_LEVEL:-ERROR}" ;;
  esac
  # shellcheck disable=SC2086
  exec java $opts -Dlog4j2.configurationFile="$ROOT/bin/log4j2.properties" ${JAVA_OPTS:-} -cp "$cp" "$cls" "$@"
}

# bench_classpath: compiles the benchmarks (module bench) and what they use if needed and prints their
# class path. One reactor build, nothing installed: the path points at this checkout's modules'
# target/classes (and spark-trainer's test fixtures), never at jars in ~/.m2.
bench_classpath() {
  local cpfile="$ROOT/bench/target/bench-classpath.txt"
  if [ ! -d "$ROOT/bench/target/classes" ] || [ ! -f "$cpfile" ] \
     || [ -n "$(find "$ROOT/bench/src" "$ROOT/spark-trainer/src" "$ROOT/tfrecord-datasource/src" -newer "$cpfile" \
                  \( -name '*.java' -o -name '*.scala' -o -name '*.proto' \) -print -quit)" ]; then
    echo "Building the benchmarks (first run; log: target/build.log)..." >&2
    quiet_build -DskipTests -pl bench -am test-compile dependency:build-classpath \
      -Dmdep.includeScope=test -Dmdep.outputFile="$cpfile"
  fi
  echo "$ROOT/bench/target/classes:$(cat "$cpfile")"
}

# ---------------------------------------------------------------------------------------------
# For the training benchmarks (bench-train, bench-scaling): Fashion-MNIST, a Spark standalone cluster
# from Maven's jars, and the application they submit to it.

FASHION_MNIST=/usr/share/datasets/fashion-mnist

# ensure_fashion_mnist: when the dataset's files are missing, says which Debian package it would
# install with which command and asks first (on a terminal); without a terminal it installs only when
# SPARK_TRAINER_INSTALL_DATA=yes, and otherwise stops with the command to run. Then checks that the
# four IDX files are there.
ensure_fashion_mnist() {
  local data="$FASHION_MNIST" f sudo_cmd="" answer
  if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo "
    echo "The training benchmarks need Fashion-MNIST ($data), from the Debian package" \
      "dataset-fashion-mnist (~30 MB). It would be installed with:" >&2
    echo "  ${sudo_cmd}apt-get install -y dataset-fashion-mnist   (after apt-get update if needed)" >&2
    if [ "${SPARK_TRAINER_INSTALL_DATA:-}" = yes ]; then
      answer=y
    elif [ -t 0 ]; then
      read -r -p "Install it now? [y/N] " answer
    else
      echo "Not a terminal: run that command yourself, or set SPARK_TRAINER_INSTALL_DATA=yes." >&2
      exit 1
    fi
    case "$answer" in
      y|Y|yes) ;;
      *) echo "Not installed; the benchmark needs it." >&2; exit 1 ;;
    esac
    ${sudo_cmd}apt-get install -y -q dataset-fashion-mnist >&2 \
      || { ${sudo_cmd}apt-get update -q >&2 && ${sudo_cmd}apt-get install -y -q dataset-fashion-mnist >&2; }
  fi
  # The package's layout (dpkg -L dataset-fashion-mnist): {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
  for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
    [ -f "$data/$f" ] || { echo "missing $data/$f (dataset-fashion-mnist)" >&2; exit 1; }
  done
}

# spark_home: prints SPARK_HOME for a standalone cluster, as a Spark distribution has it: jars/ = the
# runtime closure of spark-sql and spark-mllib at the versions the parent pom pins — the same module
# the integration tests' clusters run from (integration-tests/spark-home; StandaloneCluster writes
# the RELEASE file). (Re)built when missing or left by a -Pspark-3.5 build: the jars must be the
# pinned Spark's.
spark_home() {
  local home="$ROOT/integration-tests/spark-home/target/spark-home" version
  version=$(sed -n 's:.*<spark.version>\(.*\)</spark.version>.*:\1:p' "$ROOT/pom.xml" | head -1)
  if ! ls "$home"/jars/spark-core_*-"$version".jar > /dev/null 2>&1; then
    echo "Assembling SPARK_HOME/jars from Maven (integration-tests/spark-home)..." >&2
    (cd "$ROOT" && mvn -B -q -ntp -pl integration-tests/spark-home package >&2) \
      || { echo "building integration-tests/spark-home failed" >&2; exit 1; }
  fi
  echo "$home"
}

# app_classpath WORK: prints what the application ships with --jars: the trainer's jar and its runtime
# dependencies (DJL, PyTorch natives, the TFRecord module), this checkout's module jars rather than
# ~/.m2's copies. WORK receives runtime-classpath.txt.
app_classpath() {
  local work="$1" jar cp="" trainer_jar
  # The cluster runs the module jars, not target/classes: rebuild them when a source is newer (a
  # stale jar would silently measure old code).
  trainer_jar=$(ls "$ROOT"/spark-trainer/target/spark-trainer-*.jar 2>/dev/null | grep -v -e sources -e tests -e -all | head -1)
  if [ -z "$trainer_jar" ] \
     || [ -n "$(find "$ROOT/spark-trainer/src/main" "$ROOT/tfrecord-datasource/src/main" -newer "$trainer_jar" -type f -print -quit)" ]; then
    echo "Packaging spark-trainer (its jar is missing or older than its sources; log: target/build.log)..." >&2
    quiet_build -DskipTests -Dspotless.check.skip=true -pl spark-trainer -am package
  fi
  (cd "$ROOT" && mvn -B -q -ntp -pl spark-trainer dependency:build-classpath -DincludeScope=runtime \
       -Dmdep.outputFile="$work/runtime-classpath.txt" >&2) || { echo "build-classpath failed" >&2; exit 1; }
  for jar in $(tr ':' ' ' < "$work/runtime-classpath.txt"); do
    case "$jar" in
      */dev/sparktrainer/tfrecord-datasource/*) jar=$(ls "$ROOT"/tfrecord-datasource/target/tfrecord-datasource-*.jar | grep -v -e sources -e tests | head -1) ;;
    esac
    cp="$cp:$jar"
  done
  trainer_jar=$(ls "$ROOT"/spark-trainer/target/spark-trainer-*.jar | grep -v -e sources -e tests -e -all | head -1)
  echo "$trainer_jar$cp"
}

# spark_java_opens: prints the JVM flags Spark 4 needs on Java 17, from the one place they live (the
# parent pom).
spark_java_opens() {
  sed -n 's:.*<spark.java.opens>\(.*\)</spark.java.opens>.*:\1:p' "$ROOT/pom.xml"
}

# stop_cluster_pids WORK: stops, by process id, whatever cluster process is left under WORK (the Java
# side stops its processes itself; this is the backstop). StandaloneCluster lists them in
# WORK/cluster-*/pids. A pid is only signalled while its command line still names WORK or this
# checkout's log4j configuration (a pid reused by an unrelated process is left alone).
stop_cluster_pids() {
  local work="$1" f pid name
  for f in "$work"/cluster-*/pids; do
    [ -f "$f" ] || continue
    while read -r pid name; do
      if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -e "$work" -e "$ROOT/bin/log4j2.properties"; then
        pkill -TERM -P "$pid" 2>/dev/null || true
        kill -TERM "$pid" 2>/dev/null || true
      fi
    done < "$f"
  done
}

# find_torch_python: sets PYTHON to the interpreter of the PyTorch anchors (bin/torch-step.py,
# bin/torch-train.py): PYTHON as given if it imports torch, else the first of python3,
# /usr/bin/python3 that does; "none" (and says so) when there is none. PYTHON=none skips them.
find_torch_python() {
  if [ -z "${PYTHON:-}" ]; then
    PYTHON=none
    for p in python3 /usr/bin/python3; do
      if command -v "$p" > /dev/null && "$p" -c 'import torch' 2> /dev/null; then
        PYTHON=$(command -v "$p")
        break
      fi
    done
    [ "$PYTHON" = none ] && echo "No python3 with torch found: no PyTorch anchor (set PYTHON to choose one)." >&2
  elif [ "$PYTHON" != none ] && ! "$PYTHON" -c 'import torch' 2> /dev/null; then
    echo "PYTHON=$PYTHON cannot import torch: no PyTorch anchor." >&2
    PYTHON=none
  fi
  return 0
}
