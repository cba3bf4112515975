"""The watcher: follow every session transcript live, log detections, write clear requests.

Modules, one concern each: ``follower`` (one file: offset, identity, new bytes),
``sessions`` (the registry: a detector per session, catch-up, detection -> request, log,
status), ``outcomes`` (what became of a detection), ``observer`` (watchdog events and
listings -> hints), ``watcher`` (the loop), ``report`` (the lines a person reads),
``main`` (``loop-killer-watch``), ``commands`` (``loop-killer status`` / ``clear``).
"""
