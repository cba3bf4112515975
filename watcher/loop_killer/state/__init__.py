"""The state folder's files (one module per kind), shared by the watcher, the hooks and the CLI."""
