"""shoal.cli: the `shoal` command line."""
