#!/usr/bin/env bash
# Test resource (not for clusters: deploy/ has the real discovery script). A Spark resource discovery
# script that reports one fake GPU per standalone worker, whose address is the worker's index
# (STANDALONE_CLUSTER_WORKER, set by the test's StandaloneCluster): worker 0 offers GPU "0", worker 1
# GPU "1", so each executor, and each barrier task, gets its own address. No GPU is behind it.
echo "{\"name\": \"gpu\", \"addresses\": [\"${STANDALONE_CLUSTER_WORKER:-0}\"]}"
