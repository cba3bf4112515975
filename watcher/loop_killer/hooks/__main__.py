"""``python -m loop_killer.hooks``: run the hook for the event on stdin."""

from loop_killer.hooks.entry import main

raise SystemExit(main())
