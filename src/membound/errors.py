"""Errors a user can act on: the CLI prints their message as one line and exits non-zero."""

from __future__ import annotations


class MemboundError(Exception):
    """A failure with a one-sentence, actionable message (no traceback shown by the CLI)."""

    exit_code = 2


class BadInput(MemboundError):
    """The input (a file, a shape, an argument) cannot be used; the message says why."""


class NeedsGPU(MemboundError):
    """The requested measurement needs a CUDA device and none is available."""
