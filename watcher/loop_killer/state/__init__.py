"""Files shared by the watcher, the hooks and the CLI, and how a person reads them.

One module per kind of file: ``files`` (where things live; safe reads and writes),
``config`` (the settings), ``session`` (each session's one record: its tool-call counts
and its turn), ``inbox`` (clear requests), ``records`` (one record per detection, things
said once), ``journal`` (the detection log), ``status`` (per-session status, the
heartbeat), ``refused`` (whether a call is refused now), ``tailing`` (a transcript's tail,
read backwards), ``report`` (the lines a person reads). Imports only the engine and the
foundations.
"""
