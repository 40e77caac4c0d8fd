# SPDX-License-Identifier: Apache-2.0
"""errors.py - the exception every failing call raises.

GwError carries the C status (number and symbol, e.g. -22 / GW_ERR_INVALID_KEY),
its text, and the context's detail message (what failed, on which object, why,
with what input).  A few statuses also derive from the matching built-in
exception so ordinary `except ValueError` / `except TimeoutError` code works.
"""


class GwError(Exception):
    """A failed gpuwire call: .status (int), .name (symbol), .text, .detail."""

    def __init__(self, status: int, name: str, text: str, detail: str = "") -> None:
        self.status = status
        self.name = name
        self.text = text
        self.detail = detail
        msg = "%s (%s)" % (name, text)
        if detail:
            msg += ": " + detail
        super().__init__(msg)


class InvalidArgument(GwError, ValueError):
    """GW_ERR_INVALID: bad input (the detail names it)."""


class Timeout(GwError, TimeoutError):
    """GW_ERR_TIMEOUT."""


class InvalidKey(GwError):
    """GW_ERR_INVALID_KEY: a remote key unknown, malformed or revoked."""


class IntegrityError(GwError):
    """GW_ERR_INTEGRITY: the end-to-end check found data that differs from
    what the source sent (the detail names the entry, its offset and both
    CRC32Cs); raised by the initiator's request and by the target's
    wait_notify / wait_count in place of that notification."""


class EndpointError(GwError, ConnectionError):
    """Statuses -40 .. -59: the endpoint is unusable."""


_BY_STATUS = {-1: InvalidArgument, -7: Timeout, -17: IntegrityError, -22: InvalidKey}


def error_class(status: int) -> "type[GwError]":
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if -60 < status <= -40:
        return EndpointError
    return GwError
