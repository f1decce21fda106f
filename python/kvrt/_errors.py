"""kvrt's status codes as Python exceptions.

Every failing libkvrt call raises a subclass of :class:`kvrt.Error` whose
message is libkvrt's own (``kvrt_error_message()``): what was wrong, with
which value, and what is valid.
"""


class Error(RuntimeError):
    """A kvrt call failed.  ``status`` is the C status code (negative),
    ``status_name`` its constant name, ``message`` libkvrt's message."""

    status = None
    status_name = "KVRT_ERR"

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class InvalidArgumentError(Error, ValueError):
    """KVRT_ERR_INVALID: a bad name, number, shape or misuse."""
    status, status_name = -1, "KVRT_ERR_INVALID"


class SizeOverflowError(Error, OverflowError):
    """KVRT_ERR_OVERFLOW: a size does not fit in 64 bits."""
    status, status_name = -2, "KVRT_ERR_OVERFLOW"


class OutOfMemoryError(Error, MemoryError):
    """KVRT_ERR_NOMEM: host memory exhausted."""
    status, status_name = -3, "KVRT_ERR_NOMEM"


class RefusedError(Error):
    """KVRT_ERR_REFUSED: a layout refused or unsatisfiable."""
    status, status_name = -4, "KVRT_ERR_REFUSED"


class NoDeviceError(Error):
    """KVRT_ERR_NODEV: no such backend, or it has no device."""
    status, status_name = -5, "KVRT_ERR_NODEV"


class StateError(Error):
    """KVRT_ERR_STATE: not allowed in the current state (e.g. a closed cache)."""
    status, status_name = -6, "KVRT_ERR_STATE"


class DeviceError(Error):
    """KVRT_ERR_DEVICE: the device or its driver failed."""
    status, status_name = -7, "KVRT_ERR_DEVICE"


class UnsupportedError(Error):
    """KVRT_ERR_UNSUPPORTED: the backend cannot do this (operation, type, export)."""
    status, status_name = -8, "KVRT_ERR_UNSUPPORTED"


class PluginError(Error):
    """KVRT_ERR_PLUGIN: a plugin is malformed or misbehaved."""
    status, status_name = -9, "KVRT_ERR_PLUGIN"


class InternalError(Error):
    """KVRT_ERR_INTERNAL: a bug in kvrt."""
    status, status_name = -10, "KVRT_ERR_INTERNAL"


_BY_STATUS = {cls.status: cls for cls in (
    InvalidArgumentError, SizeOverflowError, OutOfMemoryError, RefusedError, NoDeviceError,
    StateError, DeviceError, UnsupportedError, PluginError, InternalError)}


def error_for(status, message):
    """The exception for a C status and message."""
    cls = _BY_STATUS.get(status, Error)
    return cls(message, status)
