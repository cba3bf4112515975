"""Files shared by the watcher, the Stop hook and the CLI, under the state directory.

One module per kind of file: ``paths`` (where things live), ``inbox`` (clear requests),
``journal`` (the detection log), ``status`` (per-session status and the heartbeat).
"""
