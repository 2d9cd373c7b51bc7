#!/usr/bin/env bash
# End-to-end run on a throwaway kind cluster (1 control plane + 2 workers):
#
#   1. check tools     kind, a container engine (docker or podman, its daemon reachable), kubectl;
#                      any missing: print "SKIP: <reason>" and exit 0 (CI has none of them)
#   2. cluster         kind create cluster from tests/e2e/kind-config.yaml; each node mounts
#                      $WORK/nodes/<node> at /var/lib/shoal (the chart's allowed hostPath root)
#   3. images          build broker_image/Dockerfile as shoal:e2e (+ tag shoal:e2e-roll for the
#                      roll test), broker_image/Dockerfile.spark as shoal-spark:e2e if present,
#                      tests/e2e/Dockerfile as shoal-e2e-tests:e2e; load them into the nodes
#   4. operator        helm install shoal charts/shoal (helm from .venv/bin or tools/get_helm.py)
#   5. cluster CRs     kubectl apply tests/e2e/manifests/{namespace,broker,topic}.yaml, then
#                      kubectl wait --for=condition=Ready broker/e2e and topic/e2e-events; the
#                      StreamAnalysis test's local PV and claim (manifests/stream-state.yaml)
#   6. tests           tests/e2e/test_kind.py as the Job in manifests/runner.yaml, inside the
#                      cluster: brokers register pod IPs, which port-forwards cannot reach
#   7. outside         routes from this host to each node's podCIDR (root), then
#                      tests/e2e/test_kind_outside.py here with the repository's .venv: shoal.client
#                      and the official Java client as outside applications, a SIGKILLed master
#                      container, the pods' security context and memory
#   8. teardown        kind delete cluster, the routes and the scratch folder (SHOAL_E2E_KEEP=1 keeps them)
#
# Usage: tests/e2e/run-kind.sh            (from anywhere; exit status = the tests' result)
#        `make kind-e2e` builds kind and its node image first (tools/get_images.py) and calls this.
# Environment: SHOAL_E2E_CLUSTER (kind cluster name, default shoal-e2e), SHOAL_E2E_KEEP=1,
#              SHOAL_E2E_WORK (scratch directory, default a new mktemp -d), KIND_NODE_IMAGE.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E_DIR="$REPO_ROOT/tests/e2e"
CLUSTER="${SHOAL_E2E_CLUSTER:-shoal-e2e}"
NAMESPACE=shoal-e2e
OPERATOR_NAMESPACE=shoal-system
BROKER=e2e
TOPIC=e2e-events
READY_TIMEOUT=15m
TESTS_TIMEOUT_S=2400

log() { printf '\n== %s\n' "$*"; }
# Under CI=true nothing may skip: a missing tool fails the run instead (.ci/run installs docker).
skip() {
    if [ -n "${CI:-}" ]; then echo "FAIL: $* (CI=true: the kind suite must run)"; exit 1; fi
    echo "SKIP: $* (tests/e2e/run-kind.sh needs kind, docker or podman, and kubectl)"; exit 0
}

# ---------------------------------------------------------------- 1. tools
command -v kind >/dev/null 2>&1 || skip "kind is not installed"
ENGINE=""
for candidate in docker podman; do
    if command -v "$candidate" >/dev/null 2>&1; then ENGINE="$candidate"; break; fi
done
[ -n "$ENGINE" ] || skip "no container engine (docker or podman) is installed"
"$ENGINE" info >/dev/null 2>&1 || skip "$ENGINE is installed but its daemon is not reachable ($ENGINE info failed)"
command -v kubectl >/dev/null 2>&1 || skip "kubectl is not installed"
HOST_PYTHON="$REPO_ROOT/.venv/bin/python"
[ -x "$HOST_PYTHON" ] || skip "no $HOST_PYTHON for the tests run from this host (make .venv/.installed-dev)"
[ "$(id -u)" = 0 ] || skip "routing this host to the pods' network needs root"
if [ "$ENGINE" = podman ]; then export KIND_EXPERIMENTAL_PROVIDER=podman; fi

WORK="${SHOAL_E2E_WORK:-$(mktemp -d -t shoal-e2e.XXXXXX)}"
mkdir -p "$WORK/bin" "$WORK/nodes/control-plane" "$WORK/nodes/worker-1" "$WORK/nodes/worker-2" "$WORK/helm"
export HELM_CACHE_HOME="$WORK/helm/cache" HELM_CONFIG_HOME="$WORK/helm/config" HELM_DATA_HOME="$WORK/helm/data"
if [ -x "$REPO_ROOT/.venv/bin/helm" ]; then
    HELM="$REPO_ROOT/.venv/bin/helm"
elif command -v helm >/dev/null 2>&1; then
    HELM="$(command -v helm)"
else
    log "helm: tools/get_helm.py -> $WORK/bin"
    python3 "$REPO_ROOT/tools/get_helm.py" --dest "$WORK/bin"
    HELM="$WORK/bin/helm"
fi
export KUBECONFIG="$WORK/kubeconfig"
echo "engine=$ENGINE kind=$(command -v kind) kubectl=$(command -v kubectl) helm=$HELM work=$WORK"

ROUTES=()
cleanup() {
    status=$?
    if [ "$status" -ne 0 ]; then
        log "diagnostics (exit $status)"
        kubectl get nodes,pods,pv,pvc -A -o wide 2>/dev/null || true
        kubectl -n "$NAMESPACE" get brokers,topics -o yaml 2>/dev/null | tail -n 120 || true
        kubectl -n "$OPERATOR_NAMESPACE" logs deployment/shoal-operator --tail=200 2>/dev/null || true
    fi
    if [ "${SHOAL_E2E_KEEP:-0}" = 1 ]; then
        echo "kept kind cluster $CLUSTER (KUBECONFIG=$KUBECONFIG); delete with: kind delete cluster --name $CLUSTER"
    else
        kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
        for route in "${ROUTES[@]}"; do ip route del "$route" 2>/dev/null || true; done
        # A scratch folder of our own goes too: its image archive alone is about 2 GB.
        if [ -z "${SHOAL_E2E_WORK:-}" ]; then rm -rf "$WORK" 2>/dev/null || true; fi
    fi
    exit "$status"
}
trap cleanup EXIT

# ---------------------------------------------------------------- 2. cluster
log "kind cluster $CLUSTER"
sed "s|__SHOAL_E2E_NODES_DIR__|$WORK/nodes|g" "$E2E_DIR/kind-config.yaml" > "$WORK/kind-config.yaml"
kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
kind create cluster --name "$CLUSTER" --config "$WORK/kind-config.yaml" --kubeconfig "$KUBECONFIG" \
    ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --wait 180s

# ---------------------------------------------------------------- 3. images
log "images"
# build TAG ARGS...: the image a rebuild moves TAG off is removed once nothing else names it, so
# each run does not leave 2-3 GB of untagged images behind (`rmi` of an image ID refuses while a
# tag or a container still uses it, and the build cache stays).
build() {
    local tag="$1" old
    shift
    old="$("$ENGINE" image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)"
    "$ENGINE" build -t "$tag" "$@"
    if [ -n "$old" ] && [ "$old" != "$("$ENGINE" image inspect --format '{{.Id}}' "$tag")" ]; then
        "$ENGINE" rmi "$old" >/dev/null 2>&1 || true
    fi
}
for stale in shoal:e2e-roll shoal:0.1.0; do  # retagged below from the new shoal:e2e
    "$ENGINE" rmi "$stale" >/dev/null 2>&1 || true
done
build shoal:e2e -f "$REPO_ROOT/broker_image/Dockerfile" "$REPO_ROOT"
"$ENGINE" tag shoal:e2e shoal:e2e-roll
"$ENGINE" tag shoal:e2e shoal:0.1.0  # the tag examples/ name (test_kind_outside.py applies them)
IMAGES=(shoal:e2e shoal:e2e-roll shoal:0.1.0)
SPARK_IMAGE=""
if [ -f "$REPO_ROOT/broker_image/Dockerfile.spark" ]; then
    SPARK_IMAGE=shoal-spark:e2e
    build "$SPARK_IMAGE" -f "$REPO_ROOT/broker_image/Dockerfile.spark" "$REPO_ROOT"
    IMAGES+=("$SPARK_IMAGE")
fi
build shoal-e2e-tests:e2e -f "$E2E_DIR/Dockerfile" --build-arg BASE_IMAGE=shoal:e2e "$REPO_ROOT"
IMAGES+=(shoal-e2e-tests:e2e)
# An image archive works for docker and podman alike (`kind load docker-image` needs docker).
"$ENGINE" save -o "$WORK/images.tar" "${IMAGES[@]}"
kind load image-archive "$WORK/images.tar" --name "$CLUSTER"

# ---------------------------------------------------------------- 4. operator
log "helm install shoal"
"$HELM" install shoal "$REPO_ROOT/charts/shoal" --namespace "$OPERATOR_NAMESPACE" --create-namespace \
    --set image.repository=shoal --set image.tag=e2e --set image.pullPolicy=IfNotPresent \
    --set "hostRoots={/var/lib/shoal}" --wait --timeout 5m
kubectl -n "$OPERATOR_NAMESPACE" rollout status deployment/shoal-operator --timeout=5m

# ---------------------------------------------------------------- 5. cluster CRs
log "Broker $BROKER and Topic $TOPIC"
kubectl apply -f "$E2E_DIR/manifests/namespace.yaml"
kubectl apply -f "$E2E_DIR/manifests/broker.yaml" -f "$E2E_DIR/manifests/topic.yaml"
kubectl -n "$NAMESPACE" wait --for=condition=Ready "broker/$BROKER" --timeout="$READY_TIMEOUT"
kubectl -n "$NAMESPACE" wait --for=condition=Ready "topic/$TOPIC" --timeout="$READY_TIMEOUT"
STREAM_NODE="$CLUSTER-worker"
"$ENGINE" exec "$STREAM_NODE" sh -c 'mkdir -p /var/lib/shoal/e2e-stream && chown 10001:10001 /var/lib/shoal/e2e-stream'
sed "s|__SHOAL_E2E_STREAM_NODE__|$STREAM_NODE|" "$E2E_DIR/manifests/stream-state.yaml" | kubectl apply -f -
kubectl -n "$NAMESPACE" get brokers,topics,pods -o wide

# ---------------------------------------------------------------- 6. tests
log "tests/e2e/test_kind.py (Job e2e-runner)"
kubectl -n "$NAMESPACE" delete job e2e-runner --ignore-not-found
sed "s|__SHOAL_E2E_SPARK_IMAGE__|$SPARK_IMAGE|" "$E2E_DIR/manifests/runner.yaml" > "$WORK/runner.yaml"
kubectl apply -f "$WORK/runner.yaml"
deadline=$((SECONDS + TESTS_TIMEOUT_S))
result=""
while [ "$SECONDS" -lt "$deadline" ]; do
    succeeded="$(kubectl -n "$NAMESPACE" get job e2e-runner -o jsonpath='{.status.succeeded}')"
    failed="$(kubectl -n "$NAMESPACE" get job e2e-runner -o jsonpath='{.status.failed}')"
    if [ "${succeeded:-0}" -ge 1 ]; then result=passed; break; fi
    if [ "${failed:-0}" -ge 1 ]; then result=failed; break; fi
    sleep 5
done
kubectl -n "$NAMESPACE" logs job/e2e-runner --tail=-1 || true
case "$result" in
    passed) log "tests/e2e/test_kind.py passed" ;;
    failed) log "tests/e2e/test_kind.py FAILED"; exit 1 ;;
    *) log "e2e runner did not finish within $TESTS_TIMEOUT_S s"; exit 1 ;;
esac

# ---------------------------------------------------------------- 7. outside
log "routes to the pods' network, then tests/e2e/test_kind_outside.py from this host"
while read -r cidr address; do
    [ -n "$cidr" ] && [ -n "$address" ] || continue
    ip route replace "$cidr" via "$address"
    ROUTES+=("$cidr")
    echo "route $cidr via $address"
done < <(kubectl get nodes -o jsonpath='{range .items[*]}{.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}')
(cd "$REPO_ROOT" && SHOAL_E2E_KUBECONFIG="$KUBECONFIG" SHOAL_E2E_NAMESPACE="$NAMESPACE" SHOAL_E2E_BROKER="$BROKER" \
    SHOAL_E2E_TOPIC=E2EEvents "$HOST_PYTHON" -m pytest -W error -ra -v tests/e2e/test_kind_outside.py)
log "e2e passed"
