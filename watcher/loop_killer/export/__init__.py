"""The loop figures for monitoring systems (Prometheus, OpenTelemetry), from the detection
log; imported only when asked for, so the optional extras stay optional."""
