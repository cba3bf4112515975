"""Tests of the Stop hook (``loop_killer.hooks``) and the plugin's Python launcher."""
