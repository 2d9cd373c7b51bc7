"""shoal.spark: a PySpark data source over store files, and the analysis jobs."""
