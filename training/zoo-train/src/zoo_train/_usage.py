"""``UsageError``: a mistake in the command line or the run configuration."""

from __future__ import annotations


class UsageError(ValueError):
    """Bad user input to the ``zoo`` command line; the message is one sentence naming the fix."""
