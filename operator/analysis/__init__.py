"""StoreAnalysis: scheduled Spark runs over a Broker's stores (docs/analysis.md).

`spec.py` parses the custom resource, `manifests.py` builds the Jobs, `status.py` observes runs
from their Jobs (all three pure), and `handlers.py` holds the kopf handlers; importing it
registers them, so this package's `__init__` imports nothing (and no kopf).
"""
