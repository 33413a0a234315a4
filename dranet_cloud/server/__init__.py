"""The BYODP server: this project's provider host behind DRANET's webhook protocol.

DRANET's Go daemon already speaks BYODP (``--profile-provider=webhook
--webhook-url=...``), so serving the host over that protocol makes every Python
plugin, and the built-in ``local-ipam`` provider, usable by today's DRANET.

Modules: :mod:`.app` (the FastAPI application), :mod:`.middleware` (body cap and
access log), :mod:`.listen` (unix/TCP sockets), :mod:`.collector` (periodic
IPAM garbage collection) and :mod:`.runner` (uvicorn, signals, clean-up).

Nothing here is imported by the rest of the package: FastAPI and uvicorn are
the optional ``dranet-cloud[server]`` extra, loaded only by ``dranet-cloud serve``.
"""
