# ring-coordinator: the daemon (not built yet).
