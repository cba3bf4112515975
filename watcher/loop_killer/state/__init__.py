"""Files shared by the watcher, the Stop hook and the CLI, under the state directory.

One module per kind of file: ``files`` (where things live, state folders that are never
links; safe reads and writes: no links, no FIFOs, bounded; transcripts opened without
blocking), ``inbox`` (clear requests), ``records`` (one record per detection, and things
said to the person once), ``journal`` (the detection log), ``status`` (per-session status
and the heartbeat).
"""
