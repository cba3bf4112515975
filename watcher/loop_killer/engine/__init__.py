"""The pure core: rules, transcript reading and run detection. No I/O, no names of its own."""
