"""``python -m loop_killer.cli``: the command line."""

from loop_killer.cli import main

raise SystemExit(main())
