"""In-process change notices: a service tells whoever listens that something changed.

Used by the protocol surface (resource subscriptions, ``list_changed``) and the dashboard, so
neither polls a store. A listener is called synchronously after the change is committed, with
the changed key (a task id, or ``"policies"``); it must return quickly (schedule real work).
A listener that raises is logged and kept: one broken subscriber never breaks a write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("bosun.changes")

Listener = Callable[[str], None]


class ChangeListeners:
    """A set of listeners for one kind of change."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._listeners: list[Listener] = []

    def add(self, listener: Listener) -> Callable[[], None]:
        """Register ``listener``; returns the function that removes it again."""
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def notify(self, key: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(key)
            except Exception:
                log.exception("a %s change listener failed (ignored)", self.what)

    def __len__(self) -> int:
        return len(self._listeners)
