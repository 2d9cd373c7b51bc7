"""StreamAnalysis: a long-running Spark Structured Streaming query over a Broker's topics (docs/spark.md).

`spec.py` parses the custom resource, `manifests.py` builds its StatefulSet and Service, `status.py`
reads its pod and progress into the status (all three pure), and `handlers.py` holds the kopf
handlers; importing it registers them, so this package's `__init__` imports nothing (and no kopf).
"""
