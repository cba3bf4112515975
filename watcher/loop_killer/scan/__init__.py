"""``loop-killer scan``: every past loop in the history of Claude Code sessions, and what it
cost. Tokens and their price are counted here for everyone (``ledger``, ``prices``, ``usage``).
Nothing is imported here: ``loop-killer --help`` stays quick."""

__all__: list[str] = []
