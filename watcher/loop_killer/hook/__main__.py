"""``python -m loop_killer.hook``: run the hook for the event on stdin."""

from loop_killer.hook.entry import main

raise SystemExit(main())
