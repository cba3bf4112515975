"""The watcher: follow every session transcript live, log detections, write clear requests.

Modules, one concern each: ``follower`` (one file: offset, identity, new bytes),
``sessions`` (the registry: the engine's reader per session, catch-up, dormancy),
``tracked`` (what is kept per session), ``respond`` (detection -> record, request, log;
prompts; outcomes), ``tool_repeats`` (tool-repeat loops in the transcripts), ``outcomes``
(what became of a detection: pure), ``publish`` (the status files), ``housekeeping``
(expired requests, statuses and records of deleted transcripts), ``observer`` (watchdog
events and listings -> hints), ``safety_net`` (the passes that find lost events),
``pace`` (how far behind the loop is), ``watcher`` (the loop), ``report`` (the lines a
person reads), ``notify`` (desktop notifications), ``main`` (``loop-killer-watch``),
``commands`` (``loop-killer status`` / ``clear`` / ``config``).
"""
