"""The coordinator: pure routing and mission decisions over its journal, and the shell that runs them."""
