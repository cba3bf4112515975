"""``loop-killer top``: every session active lately, live, one row each.

``rows`` builds what is shown (pure), ``view`` draws it with rich, ``app`` is the shell
(reads the watcher's state, keys, the live screen). Nothing here is imported by a hook.
"""
