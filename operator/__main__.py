"""`python -m shoal.operator [--liveness URL]`: run the operator with kopf.

Watches the namespaces listed (comma-separated) in SHOAL_WATCH_NAMESPACES, or the whole cluster
when it is empty or unset. SHOAL_ALLOWED_HOSTPATH_ROOTS (colon-separated) is read by settings.py.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

EXTRA_HINT = "pip install 'shoal[operator]'"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m shoal.operator", description=__doc__)
    parser.add_argument("--liveness", default=None, help="liveness endpoint, e.g. http://0.0.0.0:8080/healthz")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=int(os.environ.get("SHOAL_OPERATOR_METRICS_PORT", "0")),
        help="serve Prometheus metrics on this port (0: off); env SHOAL_OPERATOR_METRICS_PORT",
    )
    args = parser.parse_args(argv)
    try:  # the [operator] extra; imported here so --help and a missing extra need none of it
        import kopf  # noqa: PLC0415
        import prometheus_client  # noqa: PLC0415

        import shoal.operator.analysis.handlers  # noqa: PLC0415  (importing registers the StoreAnalysis handlers)
        import shoal.operator.stream.handlers  # noqa: F401, PLC0415  (... and the StreamAnalysis ones)
        from shoal.operator import handlers  # noqa: PLC0415
    except ModuleNotFoundError as error:
        sys.exit(f"python -m shoal.operator needs the [operator] extra (no module {error.name!r}): {EXTRA_HINT}")
    logging.basicConfig(level=os.environ.get("SHOAL_LOG_LEVEL", "INFO").upper())
    if args.metrics_port:
        prometheus_client.start_http_server(args.metrics_port)
    namespaces = handlers.watched_namespaces()
    kopf.run(
        clusterwide=not namespaces,
        namespaces=namespaces,
        liveness_endpoint=args.liveness,
        standalone=True,
    )


if __name__ == "__main__":
    main()
