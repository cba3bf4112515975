"""``python -m loop_killer.hook``: run the Stop hook (reads the hook input on stdin)."""

from loop_killer.hook.stop_hook import main

raise SystemExit(main())
