"""The state folder's files (one module per kind), shared by the watcher, the hooks and the
CLI, and how a person reads them. Imports only the engine and the foundations."""
