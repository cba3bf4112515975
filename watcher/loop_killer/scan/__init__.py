"""``loop-killer scan``: every past loop in the history of Claude Code sessions, and what it
cost. The same engine as the watcher and the hook, pointed at every transcript.

It reads with the engine's ``prefilter`` (lines that cannot matter skipped unparsed).
Modules, one concern each: ``ledger`` (a scope's token usage, once per reply), ``loops``
(the engine's detections and tool-repeat counts grouped into whole loops),
``transcript`` (one file's bytes -> its loops: pure), ``files`` (finding transcripts,
reading one safely), ``pool`` (every core), ``prices`` (the price table and its override
file), ``summary`` (priced totals), ``report`` (the table, the JSON document, the
progress bar), ``command`` (the CLI).
Nothing is imported here: ``loop-killer --help`` stays quick.
"""

__all__: list[str] = []
