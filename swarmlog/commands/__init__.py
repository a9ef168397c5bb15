"""The `swarmlog` CLI commands, one module per verb group."""
