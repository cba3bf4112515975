"""The pure core: rules, transcript reading and run detection. No I/O here.

No names of its own: a hook imports only the modules it needs."""
