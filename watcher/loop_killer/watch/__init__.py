"""The watcher, ``loop-killer-watch`` (``main``): follow every session transcript live, log
detections, write clear requests. The long-running process only: the commands a person
runs are in ``cli``, the monitoring export in ``export``, its words in ``state.report``.
"""
