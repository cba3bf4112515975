"""The loop figures for monitoring systems, from the detection log: ``metrics`` (one source
for them all), ``prometheus`` (``loop-killer-watch --metrics``), ``telemetry`` (the
OpenTelemetry export beside Claude Code's own; ``telemetry_plan``: its pure core). The
watcher imports them only when asked for, so the optional extras stay optional.
"""
