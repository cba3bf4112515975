"""The watcher, ``loop-killer-watch`` (``main``): the long-running process that follows
every session transcript live, logs detections and writes clear requests."""
