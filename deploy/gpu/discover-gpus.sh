#!/usr/bin/env bash
# GPU discovery script for Spark's resource scheduling (spark.executor.resource.gpu.discoveryScript,
# and spark.driver.resource.gpu.discoveryScript for a local-mode driver). Spark runs it when an
# executor starts and reads one JSON object from stdout:
#
#   {"name": "gpu", "addresses": ["0", "1"]}
#
# The addresses are the indices nvidia-smi lists: on Kubernetes (NVIDIA device plugin) and on YARN with
# GPU isolation, the container sees only the GPUs it was given, numbered from 0. Spark then hands each
# task the addresses it assigned it (BarrierTaskContext.resources()), and spark-trainer binds those.
#
# Without nvidia-smi, or when it fails (no driver), the script says so on stderr and prints an empty
# address list: Spark then refuses to start the executor with its own message about fewer GPUs than
# spark.executor.resource.gpu.amount, and this script's stderr names the cause.
set -u
NVIDIA_SMI="${NVIDIA_SMI:-nvidia-smi}"

empty() {
  echo "discover-gpus.sh: $1" >&2
  echo '{"name": "gpu", "addresses": []}'
  exit 0
}

command -v "$NVIDIA_SMI" >/dev/null 2>&1 \
  || empty "no GPU found: '$NVIDIA_SMI' is not on the PATH (no NVIDIA driver in this container or host?)"

if ! out=$("$NVIDIA_SMI" --query-gpu=index --format=csv,noheader 2>&1); then
  empty "no GPU found: $NVIDIA_SMI failed: $(echo "$out" | head -1)"
fi

addresses=""
while IFS= read -r line; do
  index="${line//[[:space:]]/}"
  [ -z "$index" ] && continue
  case "$index" in
    *[!0-9]*) empty "unexpected output from $NVIDIA_SMI --query-gpu=index: '$line'" ;;
  esac
  addresses="${addresses:+$addresses, }\"$index\""
done <<< "$out"

[ -n "$addresses" ] || empty "no GPU found: $NVIDIA_SMI lists none"
echo "{\"name\": \"gpu\", \"addresses\": [$addresses]}"
