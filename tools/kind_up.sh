#!/usr/bin/env bash
# `make kind`: a local Kubernetes cluster with Shoal on it, from a fresh clone, with no container registry.
#
#   1. docker        tools/container_engine.py (installs and starts it where missing; root)
#   2. images        tools/get_images.py: kind, its node image, the Python base; then the broker image
#                    (broker_image/Dockerfile) as shoal:0.1.0, the tag examples/ name
#   3. cluster       kind cluster "shoal" (one node; kept if it already exists), the image loaded
#   4. operator      helm upgrade --install of charts/shoal into shoal-system
#   5. Broker        examples/cluster.yaml and examples/topic.yaml in namespace shoal, waited Ready
#   6. connect       routes from this host to the pods' network (root), then how to produce and consume
#
# Warm (images and cluster cached): under 5 minutes. `kind delete cluster --name shoal` removes it.
# Environment: SHOAL_KIND_CLUSTER (default shoal), SHOAL_KIND_NAMESPACE (default shoal).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER="${SHOAL_KIND_CLUSTER:-shoal}"
NAMESPACE="${SHOAL_KIND_NAMESPACE:-shoal}"
IMAGE=shoal:0.1.0
READY_TIMEOUT=10m
PYTHON="${PYTHON:-python3}"
[ -x "$REPO_ROOT/.venv/bin/python" ] && PYTHON="$REPO_ROOT/.venv/bin/python"
started=$SECONDS

step() { printf '\n== [%3d s] %s\n' "$((SECONDS - started))" "$*"; }

step "docker"
"$PYTHON" "$REPO_ROOT/tools/container_engine.py"

step "kind and its node image (tools/get_images.py; cold: about 10 min, warm: seconds)"
env_lines="$("$PYTHON" "$REPO_ROOT/tools/get_images.py" --print-env)"
eval "$env_lines"
export PATH="$(dirname "$KIND"):$REPO_ROOT/.venv/bin:$PATH"
if ! command -v helm >/dev/null 2>&1; then
    "$PYTHON" "$REPO_ROOT/tools/get_helm.py" --dest "$REPO_ROOT/.venv/bin"
fi

step "broker image $IMAGE (broker_image/Dockerfile)"
docker build -q -f "$REPO_ROOT/broker_image/Dockerfile" -t "$IMAGE" "$REPO_ROOT"

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
    step "kind cluster $CLUSTER exists: reusing it"
else
    step "kind cluster $CLUSTER ($KIND_NODE_IMAGE)"
    kind create cluster --name "$CLUSTER" --image "$KIND_NODE_IMAGE" --wait 180s
fi
kubectl config use-context "kind-$CLUSTER" >/dev/null
kind load docker-image "$IMAGE" --name "$CLUSTER"

step "operator (helm upgrade --install shoal charts/shoal)"
helm upgrade --install shoal "$REPO_ROOT/charts/shoal" --namespace shoal-system --create-namespace \
    --set image.repository=shoal --set image.tag=0.1.0 --set image.pullPolicy=IfNotPresent --wait --timeout 5m

step "Broker orders and Topic (examples/cluster.yaml, examples/topic.yaml) in namespace $NAMESPACE"
kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "$NAMESPACE" pod-security.kubernetes.io/enforce=baseline --overwrite >/dev/null
kubectl -n "$NAMESPACE" apply -f "$REPO_ROOT/examples/cluster.yaml" -f "$REPO_ROOT/examples/topic.yaml"
kubectl -n "$NAMESPACE" wait --for=condition=Ready broker/orders --timeout="$READY_TIMEOUT"
# The Topic is made once the group serves: the printed produce command needs it.
kubectl -n "$NAMESPACE" wait --for=condition=Ready topic/order-events --timeout="$READY_TIMEOUT"
kubectl -n "$NAMESPACE" get brokers,topics,pods -o wide

step "routes from this host to the pods"
# Brokers register their pod IPs with the NameServer, so a client outside the cluster must reach
# the pod network: route each node's podCIDR via the node's address on docker's kind network.
if [ "$(id -u)" = 0 ]; then
    kubectl get nodes -o jsonpath='{range .items[*]}{.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' \
        | while read -r cidr address; do
              ip route replace "$cidr" via "$address" && echo "route $cidr via $address"
          done
else
    echo "not root: add routes to the nodes' podCIDRs yourself (kubectl get nodes -o wide), or use a Job inside the cluster"
fi
# status.nameServerAddresses are cluster DNS names (for pods); from this host, use the pods' IPs.
namesrv="$(kubectl -n "$NAMESPACE" get pods -l app.kubernetes.io/component=nameserver,shoal.io/cluster=orders \
    -o jsonpath='{range .items[*]}{.status.podIP}:9876{" "}{end}' | xargs | tr ' ' ';')"
topic="$(kubectl -n "$NAMESPACE" get topics -o jsonpath='{.items[0].spec.topicName}' 2>/dev/null || true)"
cat <<EOF

Ready in $((SECONDS - started)) s. Shoal runs in kind cluster $CLUSTER (kubectl context kind-$CLUSTER):
  NameServer:  $namesrv
  produce:     .venv/bin/shoal produce -n '$namesrv' --count 10 ${topic:-<topic>}
  consume:     .venv/bin/shoal consume -n '$namesrv' --group demo-consumers --from-first ${topic:-<topic>}
  status:      kubectl -n $NAMESPACE get broker orders -o yaml
  remove:      kind delete cluster --name $CLUSTER
EOF
