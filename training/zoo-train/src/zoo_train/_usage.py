"""``UsageError``: a mistake in the command line or the run configuration."""

from __future__ import annotations


class UsageError(ValueError):
    """Bad user input to the ``zoo`` command line; the message is one sentence naming the fix."""

    @classmethod
    def from_error(cls, err: Exception) -> UsageError:
        """``err``'s message as a usage error, its first letter capitalised (the messages of
        the checks this wraps start lowercase, as exceptions do) unless it begins with a path
        or a quoted name, which keep their spelling."""
        text = str(err)
        first = text.split(" ", 1)[0]
        if any(c in first for c in "/.'\"`"):
            return cls(text)
        return cls(text[:1].upper() + text[1:])
