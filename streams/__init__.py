"""Stream processors: registry and liveness, the wait-for graph, token budgets, the memory projection."""
