#!/usr/bin/env python3
"""Run the example BYODP webhook server.

    python plugins/webhook/examples/example_webhook.py --listen 127.0.0.1:0
    python plugins/webhook/examples/example_webhook.py --listen unix:///tmp/webhook.sock

It prints one JSON line ``{"url": ...}`` when it is ready and serves until
SIGTERM/SIGINT.  ``--help`` lists the switches that make it misbehave.

The server itself is ``dranet_cloud_webhook/example_server.py``: a single
standard-library-only module, meant to be copied as the starting point of a
real webhook, and installed with the plugin so that ``dranet-cloud emulate
webhook`` and the tests use the very same code.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from dranet_cloud_webhook.example_server import main
except ImportError:  # run from a source checkout without the plugin installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from dranet_cloud_webhook.example_server import main

if __name__ == "__main__":
    raise SystemExit(main())
