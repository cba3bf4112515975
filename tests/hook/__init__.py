"""Tests of the Stop hook (``loop_killer.hook``) and the plugin's Python launcher."""
