"""Analysis jobs over a Shoal store: each module has main() for spark-submit and `shoal spark run`."""
