"""shoal.spark.streaming: `format("rocketmq")`, topics read and written over the remoting protocol
(Spark Structured Streaming and batch). Offsets: offsets.py; options: options.py; the cluster's
routes and offsets: cluster.py; a worker's pulls: pull_reader.py; the sink: sink.py; the Spark
classes: source.py. See docs/spark.md, "Streaming"."""
