"""The stream-processor worker: the pure folds of swarmlog.streams run as a Faust app on Kafka, RocksDB and Redis."""

from .build import build_app
from .config import StreamsConfig
from .run import run_worker

__all__ = ["StreamsConfig", "build_app", "run_worker"]
