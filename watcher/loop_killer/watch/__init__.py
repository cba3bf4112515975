"""The watcher, ``loop-killer-watch`` (``main``): follows every session transcript live."""
