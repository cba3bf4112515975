"""What already fired, so that nothing fires twice: a small memory, bounded per session.

One set per session holds the uuids of the answers that fired and of the re-prompts they
answered (the Stop hook may know a reply only by its re-prompt). UUIDs are unique, so a
single membership test covers both kinds, across all sessions (a forked transcript
carries the answers of the one it was forked from).

Only the newest ``keep`` uuids of a session are kept: a detector needs only the fired
answers still reachable from its trailing run, and the detection log keeps the rest for
a detector rebuilt from a file's start. A session nobody follows any more is forgotten
after a while (``prune``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

__all__ = ["FIRED_KEEP", "FiredMemory"]

FIRED_KEEP = 32
"""UUIDs kept per session (a run reaches back at most a few answers)."""


class FiredMemory:
    """Per session, the newest ``keep`` uuids of what fired (answers and re-prompts)."""

    __slots__ = ("_holders", "_sessions", "_touched", "keep")

    def __init__(self, keep: int = FIRED_KEEP) -> None:
        self.keep = keep
        self._sessions: dict[str, dict[str, None]] = {}  # insertion-ordered sets
        self._holders: dict[str, int] = {}  # uuid -> how many sessions hold it
        self._touched: dict[str, float] = {}  # session -> when last added to

    def __contains__(self, uuid: object) -> bool:
        return bool(uuid) and uuid in self._holders

    def __len__(self) -> int:
        """UUIDs held, all sessions together."""
        return sum(len(uuids) for uuids in self._sessions.values())

    @property
    def sessions(self) -> int:
        return len(self._sessions)

    def of(self, session_id: str) -> Collection[str]:
        return tuple(self._sessions.get(session_id, ()))

    def add(self, session_id: str, uuids: Iterable[str], now: float) -> None:
        """Remember ``uuids`` (empty ones are skipped) as fired in ``session_id``."""
        held = self._sessions.get(session_id)
        for uuid in uuids:
            if not uuid:
                continue
            if held is None:
                held = self._sessions[session_id] = {}
            if uuid in held:
                continue
            held[uuid] = None
            self._holders[uuid] = self._holders.get(uuid, 0) + 1
            if len(held) > self.keep:
                self._release(next(iter(held)), held)
        if held is not None:
            self._touched[session_id] = now

    def move(self, old: str, new: str, now: float) -> None:
        """A transcript renamed: what fired under its old name fired under the new one."""
        if old == new:
            return
        uuids = self.of(old)
        self.forget(old)
        self.add(new, uuids, now)

    def forget(self, session_id: str) -> None:
        held = self._sessions.pop(session_id, None)
        self._touched.pop(session_id, None)
        for uuid in list(held or ()):
            self._release(uuid, held)

    def prune(self, *, keep: Collection[str], untouched_since: float) -> int:
        """Forget the sessions not in ``keep`` added to before ``untouched_since``."""
        stale = [session_id for session_id, at in self._touched.items()
                 if at < untouched_since and session_id not in keep]
        for session_id in stale:
            self.forget(session_id)
        return len(stale)

    def _release(self, uuid: str, held: dict[str, None] | None) -> None:
        if held is not None:
            held.pop(uuid, None)
        count = self._holders.get(uuid, 0) - 1
        if count > 0:
            self._holders[uuid] = count
        else:
            self._holders.pop(uuid, None)
