"""dranet-cloud plugin for gce."""
