"""Client settings every swarmlog consumer on the hot path shares."""

# aiokafka sends no new fetch to a broker while one is in flight there, so a consumer of several partitions
# waits out the long poll on its idle ones before it sees new records on a busy one: at the default 500 ms that
# capped an agent at ~2 tasks/s and the coordinator at ~16 assignments/s (docs/benchmarks.md). Tansu, besides,
# answers a fetch only when its wait is over, even when records arrived meanwhile: with Faust's fixed 1.5 s the
# streams worker reported a deadlock 1.3 s after its closing wait. Agents, coordinator and worker keep it short.
FETCH_MAX_WAIT_MS = 50
