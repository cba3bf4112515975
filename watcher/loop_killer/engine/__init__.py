"""The pure core: rules, transcript reading and run detection. No I/O here.

The flow, one module a step: ``transcript`` (a line -> an event, with its token usage;
``prefilter`` skips, from their bytes, the lines that cannot matter) -> ``answers``
(events -> answers) -> ``run`` (answers -> the run, the rules -> detections); ``reader``
cuts bytes into whole lines and strings the steps together for every consumer. ``rules``
holds the product's rules and their constants; ``tool_repeat`` and ``stand_ins`` the
tool-repeat rule's counting.

Import from the modules themselves: this package holds no names of its own, so a hook
that needs one module of the engine (the tool-repeat counter, say) loads that one only.
"""
