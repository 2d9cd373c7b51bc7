#!/bin/sh
# Shoal image entrypoint: renders broker.conf from the pod's environment, then execs the process.
#
#   namesrv        the NameServer (port 9876)
#   broker         a broker: broker.conf = $SHOAL_CONFIG_DIR/broker.conf (shared by the group)
#                  + broker-<ordinal>.conf (brokerId, brokerRole) + brokerIP1=$POD_IP, where the
#                  ordinal is the suffix of the StatefulSet pod's hostname (<cluster>-g<i>-<n>)
#   prepare-store  init container: check or write the store marker, then (as root with only
#                  CHOWN/FOWNER/DAC_OVERRIDE, for hostPath) hand the directory to the broker user;
#                  for claims and emptyDir it runs as that user and fsGroup has done the handing
#   cleanup-store  reclaimPolicy Delete (a Job on the volume's node): remove $SHOAL_STORE_DIR only if
#                  its marker names $SHOAL_CLUSTER_UID; anything else is left in place
#   operator       the kopf operator (python -m shoal.operator)
#   render-broker-conf  print the path of the rendered broker.conf (what `broker` would run with)
# SHOAL_LISTEN_HOST (optional): the one address namesrv and broker bind (listenHost, metricsHost),
# for pods that share a network with others (hostNetwork); unset, they bind every address.
# See operator/manifests.py for how the operator sets these up, docs/images.md for the image.
set -eu

SHOAL_UID="${SHOAL_UID:-10001}"
SHOAL_CONFIG_DIR="${SHOAL_CONFIG_DIR:-/etc/shoal/config}"
SHOAL_STORE_DIR="${SHOAL_STORE_DIR:-/store}"
RENDERED_DIR="${SHOAL_RENDERED_DIR:-/tmp/shoal}"
MARKER="$SHOAL_STORE_DIR/.shoal-store"

die() { echo "shoal-entrypoint: $*" >&2; exit 1; }

ordinal() {
    name="${POD_NAME:-$(hostname)}"
    n="${name##*-}"
    case "$n" in
        ''|*[!0-9]*) die "cannot read a StatefulSet ordinal from pod name '$name'" ;;
    esac
    echo "$n"
}

render_broker_conf() {
    n="$(ordinal)"
    [ -r "$SHOAL_CONFIG_DIR/broker.conf" ] || die "missing $SHOAL_CONFIG_DIR/broker.conf"
    [ -r "$SHOAL_CONFIG_DIR/broker-$n.conf" ] || die "missing $SHOAL_CONFIG_DIR/broker-$n.conf (ordinal $n beyond replicasPerGroup?)"
    mkdir -p "$RENDERED_DIR"
    (
    umask 077
    {
        cat "$SHOAL_CONFIG_DIR/broker.conf"
        echo "# ordinal $n"
        cat "$SHOAL_CONFIG_DIR/broker-$n.conf"
        if [ -n "${POD_IP:-}" ]; then echo "brokerIP1=$POD_IP"; fi
        # spec.acl: the account this broker signs its own requests with, from the mounted ACL
        # Secret, so the secret key is in no ConfigMap (only in this pod's /tmp, mode 0600).
        if [ -n "${SHOAL_ACL_DIR:-}" ] && [ -r "$SHOAL_ACL_DIR/accessKey" ]; then
            echo "accessKey=$(cat "$SHOAL_ACL_DIR/accessKey")"
            echo "secretKey=$(cat "$SHOAL_ACL_DIR/secretKey")"
        fi
        if [ -n "${SHOAL_LISTEN_HOST:-}" ]; then
            echo "listenHost=$SHOAL_LISTEN_HOST"
            echo "metricsHost=$SHOAL_LISTEN_HOST"
        fi
    } > "$RENDERED_DIR/broker.conf"
    )
    echo "$RENDERED_DIR/broker.conf"
}

prepare_store() {
    : "${SHOAL_CLUSTER_UID:?SHOAL_CLUSTER_UID is required}"
    : "${SHOAL_GROUP:?SHOAL_GROUP is required}"
    n="$(ordinal)"
    [ -d "$SHOAL_STORE_DIR" ] || die "store directory $SHOAL_STORE_DIR is not mounted"
    if [ -f "$MARKER" ]; then
        owner="$(sed -n 's/^cluster-uid=//p' "$MARKER")"
        [ "$owner" = "$SHOAL_CLUSTER_UID" ] || die "$SHOAL_STORE_DIR belongs to cluster $owner, not $SHOAL_CLUSTER_UID: refusing to adopt another cluster's data"
        group="$(sed -n 's/^group=//p' "$MARKER")"
        [ "$group" = "$SHOAL_GROUP" ] || die "$SHOAL_STORE_DIR belongs to group $group, not $SHOAL_GROUP"
    else
        if [ -n "$(ls -A "$SHOAL_STORE_DIR" 2>/dev/null | grep -v '^lost+found$' || true)" ]; then
            die "$SHOAL_STORE_DIR holds data but no $MARKER: refusing to adopt it (move it away or write the marker by hand)"
        fi
        printf 'cluster-uid=%s\ngroup=%s\nordinal=%s\nformat=%s\n' \
            "$SHOAL_CLUSTER_UID" "$SHOAL_GROUP" "$n" "${SHOAL_STORE_FORMAT:-1}" > "$MARKER"
    fi
    # As the broker's user (claims and emptyDir, which fsGroup makes its group's): nothing to hand over.
    [ "$(id -u)" = 0 ] || return 0
    # Only this pod's directory; a recursive chown only when its owner is wrong (first start,
    # or data restored by root). fsGroup does not apply to hostPath volumes.
    if [ "$(stat -c %u "$SHOAL_STORE_DIR")" != "$SHOAL_UID" ]; then
        chown -R "$SHOAL_UID:$SHOAL_UID" "$SHOAL_STORE_DIR"
    fi
    chown "$SHOAL_UID:$SHOAL_UID" "$MARKER"
    chmod 0750 "$SHOAL_STORE_DIR"
}

cleanup_store() {
    : "${SHOAL_CLUSTER_UID:?SHOAL_CLUSTER_UID is required}"
    if [ ! -e "$SHOAL_STORE_DIR" ]; then
        echo "shoal-entrypoint: $SHOAL_STORE_DIR is already gone"
        return 0
    fi
    [ -f "$MARKER" ] || die "$SHOAL_STORE_DIR has no $MARKER: not removing a directory Shoal did not write"
    owner="$(sed -n 's/^cluster-uid=//p' "$MARKER")"
    [ "$owner" = "$SHOAL_CLUSTER_UID" ] || die "$SHOAL_STORE_DIR belongs to cluster $owner, not $SHOAL_CLUSTER_UID: not removing it"
    rm -rf -- "$SHOAL_STORE_DIR"
    echo "shoal-entrypoint: removed $SHOAL_STORE_DIR of cluster $SHOAL_CLUSTER_UID"
}

command="${1:-broker}"
[ "$#" -gt 0 ] && shift
case "$command" in
    namesrv) exec shoal namesrv ${SHOAL_LISTEN_HOST:+--host "$SHOAL_LISTEN_HOST"} "$@" ;;
    broker) conf="$(render_broker_conf)"; exec shoal broker -c "$conf" "$@" ;;
    render-broker-conf) render_broker_conf ;;
    prepare-store) prepare_store ;;
    cleanup-store) cleanup_store ;;
    operator) exec python -m shoal.operator "$@" ;;
    *) exec "$command" "$@" ;;
esac
