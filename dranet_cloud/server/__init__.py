"""The BYODP server: this project's provider host behind DRANET's webhook protocol.

DRANET's Go daemon already speaks BYODP (``--profile-provider=webhook
--webhook-url=...``), so serving the host over that protocol makes every Python
plugin, and the built-in ``local-ipam`` provider, usable by today's DRANET.

Modules: :mod:`.app` (the BYODP endpoints: a hand-written ASGI router, since
FastAPI's per-request machinery cost several times the work of a request),
:mod:`.docs` (the part FastAPI builds: ``/openapi.json`` from the wire
models, and the answers to unknown paths), :mod:`.middleware` (body cap, text checks, access log),
:mod:`.lane` (local-ipam claims on the event loop, group commits),
:mod:`.workers` and :mod:`.admission` (the worker threads for requests that
may block, handed out in arrival order with a deadline), :mod:`.protocol`
(byte and time bounds per connection), :mod:`.listen` (unix/TCP sockets),
:mod:`.collector` (periodic IPAM garbage collection), :mod:`.metrics` and
:mod:`.metrics_listener` (``/metrics``) and :mod:`.runner` (uvicorn,
signals, clean-up).

Nothing here is imported by the rest of the package: uvicorn and FastAPI are
the optional ``dranet-cloud[server]`` extra, loaded only by ``dranet-cloud serve``.
"""
