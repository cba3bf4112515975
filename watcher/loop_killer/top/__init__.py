"""``loop-killer top``: every session active lately, live, one row each."""
