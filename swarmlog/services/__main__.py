"""`python -m swarmlog.services`: fetch Apache Kafka's release jars into the cache (what `make setup-kafka` runs)."""

from swarmlog.services.kafka import KAFKA_VERSION, resolve_jars
from swarmlog.settings import Settings

print(f"Apache Kafka {KAFKA_VERSION} jars in {resolve_jars(Settings.from_env().cache_dir)}")
