"""The ``dranet-cloud`` command line."""
