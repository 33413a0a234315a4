"""dranet-cloud plugin for Microsoft Azure: IMDS facts and per-NIC policy routing."""
