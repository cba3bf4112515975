"""loop-killer: notice Claude Code sessions stuck in a Stop-hook re-prompt loop and end them."""

__version__ = "0.1.0"
