"""A Spark driver for test_streaming_queries.py: stream topic Src into topic Dst through the
rocketmq sink (keys and tags kept), 300 messages per micro-batch, until SIGTERM.

    python sink_driver.py NAMESRV CHECKPOINT_DIR
"""

from __future__ import annotations

import signal
import sys
import threading

from shoal.spark.session import session


def main() -> None:
    namesrv, checkpoint = sys.argv[1], sys.argv[2]
    spark = session("sink-driver", "local[2]", {"spark.ui.showConsoleProgress": "false"})
    source = (
        spark.readStream.format("rocketmq")
        .options(namesrv=namesrv, topics="Src", startingOffsets="earliest", maxMessagesPerTrigger="300")
        .load()
    )
    query = (
        source.selectExpr("body", "tags", "keys")
        .writeStream.format("rocketmq")
        .option("namesrv", namesrv)
        .option("topic", "Dst")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    while query.isActive and not stopping.is_set():
        query.awaitTermination(1)
    query.stop()
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")


if __name__ == "__main__":
    main()
