"""`swarmlog console`: a read-only web console of the live swarm, folded from the log and pushed to the browser."""
