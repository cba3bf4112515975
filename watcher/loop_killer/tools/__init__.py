"""The tool-call hooks of the tool-repeat rule: count, warn, refuse, reset.

Claude Code runs the plugin's launcher for ``PreToolUse`` (refuse a call that keeps giving
the same result), ``PostToolUse`` / ``PostToolUseFailure`` (count each result, warn on the
third identical one) and ``UserPromptSubmit`` (the person spoke: start afresh); the hook
entry (``loop_killer.hook.entry``) hands their input to ``hook.run_input``.

One module per concern: ``hook`` (the thin shell), ``store`` (the session's counts on
disk, under a lock), ``words`` (every word the model and the person see, and the output
JSON). What is counted and the thresholds come from ``loop_killer.config``. The counting
itself is the engine's
(``loop_killer.engine.tool_repeat``). Nothing is imported here: these hooks run on every
tool call and import only what that call needs.
"""

__all__: list[str] = []
