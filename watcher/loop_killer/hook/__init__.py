"""The Stop hook: the plugin's Python brain, and the terminal-typing hands.

At the end of every main-session turn Claude Code runs the plugin's Stop hook
(``plugin/hooks/launch.py``, which runs ``python -m loop_killer.hook``). It takes a
clear request for its session when the watcher (or ``loop-killer clear``) left one, or
decides on its own whether this reply crossed a threshold, and if so ends the turn
(``continue: false``) and gets ``/goal clear`` run: by the plugin's mod where it is
loaded, else by typing into its own tmux or screen pane.

One module per concern: ``decide`` (pure decisions), ``local_detect`` (the transcript
tail, read and judged), ``anchor`` (which re-prompt the last reply answered, kept between
two Stops), ``wait`` (bounded polling), ``actuator`` (terminal typing, mod outcome
files), ``notice`` (every word the person sees), ``stop_hook`` (the thin shell),
``setup`` (``loop-killer install`` / ``doctor``). Nothing is imported here: the hook
runs at every turn end and imports only what the turn needs.
"""

__all__: list[str] = []
