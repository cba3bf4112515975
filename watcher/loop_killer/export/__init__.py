"""The loop figures for monitoring systems, from the detection log (imported only when asked)."""
