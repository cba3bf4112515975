"""``loop-killer scan``: every past loop in the history of Claude Code sessions, and what it
cost. The same engine as the watcher and the hook, pointed at every transcript.

Tokens and their price are counted here, one way for everyone: ``ledger`` (a scope's
usage, once per reply), ``prices`` (the price table and its override file), ``usage`` (a
live session's tally: the watcher, ``top`` and the metrics). The CLI: ``command``.
Nothing is imported here: ``loop-killer --help`` stays quick.
"""

__all__: list[str] = []
