"""The pure core: rules, transcript reading and run detection. No I/O here.

The flow: ``transcript`` (a line -> an event) -> ``answers`` (events -> answers) -> ``run``
(answers -> the run, the rules -> detections); ``reader`` strings the steps together. This
package holds no names of its own: a hook imports only the modules it needs.
"""
