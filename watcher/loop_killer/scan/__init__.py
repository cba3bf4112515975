"""``loop-killer scan``: every past loop in the history of Claude Code sessions, and what it
cost. The engine of the watcher and the hook, pointed at every transcript. Nothing is
imported here: ``loop-killer --help`` stays quick.
"""

__all__: list[str] = []
