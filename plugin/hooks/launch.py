"""Claude Code runs this file for every hook event (``hooks.json``). The launcher is the
module beside it, ``loop_killer_launch``: imported, so Python keeps it compiled (a script
is compiled afresh at every run). Standard library only; always exits 0."""

import os
import sys

try:
    _here = os.path.dirname(os.path.abspath(__file__))
    if _here not in sys.path:  # (not there under -P / PYTHONSAFEPATH)
        sys.path.insert(0, _here)
    from loop_killer_launch import run
except BaseException:  # noqa: BLE001, S110 - never fail (or re-prompt) the turn
    sys.exit(0)
run()
