"""``loop-killer top``: every session active lately, live, one row each (``rows`` pure,
``view`` drawn with rich, ``app`` the shell)."""
