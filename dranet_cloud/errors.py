"""The errors a host or plugin raises, each tied to one CLI exit code.

Messages must name the plugin, the device or endpoint involved, and the fix,
because operators read them in a crash-looping pod's log with nothing else.
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
