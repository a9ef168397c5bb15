"""The streams worker's configuration from SWARMLOG_STREAMS_*: budgets per agent and globally, clear errors."""

from __future__ import annotations

import pytest

from swarmlog.errors import ConfigError
from swarmlog.settings import Settings
from swarmlog.streams.app.config import StreamsConfig, knob

SETTINGS = Settings(broker="kafka", bootstrap="127.0.0.1:9092")


def test_budget_overrides_apply_per_agent_and_the_rest_get_the_global_budget():
    config = StreamsConfig.from_env(SETTINGS, {"SWARMLOG_STREAMS_BUDGET_TOKENS": "1000",
                                               "SWARMLOG_STREAMS_BUDGET_OVERRIDES": "planner=5000, tiny=10"})
    policy = config.budget_policy
    assert (policy.budget_for("planner"), policy.budget_for("tiny"), policy.budget_for("other")) == (5000, 10, 1000)


@pytest.mark.parametrize("overrides", ["planner", "planner=", "=10", "planner=0", "planner=lots"])
def test_a_malformed_override_is_a_config_error_naming_the_variable(overrides):
    with pytest.raises(ConfigError, match="SWARMLOG_STREAMS_BUDGET_OVERRIDES"):
        StreamsConfig.from_env(SETTINGS, {"SWARMLOG_STREAMS_BUDGET_OVERRIDES": overrides})


def test_a_knob_reads_like_the_worker_does_so_replay_folds_with_the_same_window():
    assert knob("budget_window_ms", {"SWARMLOG_STREAMS_BUDGET_WINDOW_MS": "4000"}) == 4000
    assert knob("budget_window_ms", {}) == StreamsConfig(SETTINGS).budget_window_ms
