"""The errors a host or plugin raises, each tied to one CLI exit code.

Messages must name the plugin, the device or endpoint involved, and the fix,
because operators read them in a crash-looping pod's log with nothing else.
:class:`WouldBlock` is the exception: a signal inside the server that never
reaches the command line.
"""

from __future__ import annotations


class DranetCloudError(Exception):
    """Base class; ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class ConfigError(DranetCloudError):
    """Bad flags, unknown plugin names, malformed input files (exit 2)."""

    exit_code = 2


class PluginError(DranetCloudError):
    """An installed plugin breaks the hook contract, so it is not loaded (exit 2).

    Like a bad flag, it is fixed before anything starts: in the plugin's code,
    or by uninstalling its distribution.
    """

    exit_code = 2


class UnknownHookError(PluginError):
    """A plugin marks ``@hookimpl`` a function whose name is no hook (a typo)."""


class ProviderInitError(DranetCloudError):
    """An explicitly requested provider could not start (exit 3).

    Raised only for providers the operator asked for by name; auto-detected
    providers that fail are logged and dropped instead.
    """

    exit_code = 3


class ProfileDenied(DranetCloudError):
    """The profile provider refused the claim's configuration (exit 4).

    ``status`` follows the BYODP convention: 400 invalid request, 404 unknown
    profile, 409 conflict with current state (address in use, range full).
    """

    exit_code = 4

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ProviderUnavailable(DranetCloudError):
    """A provider did not answer in time or answered 5xx (exit 5).

    Temporary by nature: kubelet retries NodePrepareResources.
    """

    exit_code = 5


class AddressConflict(ProfileDenied):
    """A static address is held by another owner (HTTP 409)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=409)


class RangeExhausted(ProfileDenied):
    """No free address is left in a range (HTTP 409)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=409)


class WouldBlock(Exception):
    """A step of a request on the server's event loop would have had to wait.

    Raised inside :meth:`SqliteStore.deferred_writes
    <dranet_cloud.ipam.node.sqlite.SqliteStore.deferred_writes>`: the store lock
    is held by another thread, another process holds the database's write
    lock, or a cluster-scope call would call the Kubernetes API.  The refused
    step read and wrote nothing; the server runs the request again on a
    worker thread, where waiting is allowed.

    An ordinary exception, on purpose.  It used to be a ``BaseException``,
    so that the plugin and host code between the server and the store, which
    turns ordinary exceptions into error answers, would let it through; but
    a ``BaseException`` also skips the ``except Exception`` clean-up a plugin
    relies on, and a bare ``except:`` swallowed the signal anyway.  Now the signal does not
    travel in the exception: before raising, the store records it on the
    thread's deferred-writes scope (``DeferredWrites.blocked``), and the
    server's store lane reads it there once the request returns, whatever
    the code in between did with the exception (caught it and answered, or
    raised another error): plugin code cannot swallow it by accident.  The
    exception only ends the request early.  The server's own error mapping
    and the host's release let it pass, so a request that is merely run
    again logs no error.  A return value would have had to pass through
    every plugin hook instead.
    """
