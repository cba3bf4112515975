"""The watcher: follow every session transcript live, log detections, write clear requests
(``watcher`` the loop, ``sessions`` the registry, ``respond`` what a step means, ``main``
the ``loop-killer-watch`` entry, ``commands`` ``status``/``clear``/``config``)."""
