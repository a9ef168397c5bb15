"""The streams worker's configuration from SWARMLOG_STREAMS_*: budgets per agent and globally, clear errors."""

from __future__ import annotations

import pytest

from swarmlog.errors import ConfigError
from swarmlog.settings import Settings
from swarmlog.streams.app.config import StreamsConfig, worker_setting

SETTINGS = Settings(broker="kafka", bootstrap="127.0.0.1:9092")


def test_budget_overrides_apply_per_agent_and_the_rest_get_the_global_budget():
    config = StreamsConfig.from_env(
        SETTINGS,
        {"SWARMLOG_STREAMS_BUDGET_TOKENS": "1000", "SWARMLOG_STREAMS_BUDGET_OVERRIDES": "planner=5000, tiny=10"},
    )
    policy = config.budget_policy
    assert (policy.budget_for("planner"), policy.budget_for("tiny"), policy.budget_for("other")) == (5000, 10, 1000)


@pytest.mark.parametrize("overrides", ["planner", "planner=", "=10", "planner=0", "planner=lots"])
def test_a_malformed_override_is_a_config_error_naming_the_variable(overrides):
    with pytest.raises(ConfigError, match="SWARMLOG_STREAMS_BUDGET_OVERRIDES"):
        StreamsConfig.from_env(SETTINGS, {"SWARMLOG_STREAMS_BUDGET_OVERRIDES": overrides})


def test_a_knob_reads_like_the_worker_does_so_replay_folds_with_the_same_window():
    assert worker_setting("budget_window_ms", {"SWARMLOG_STREAMS_BUDGET_WINDOW_MS": "4000"}) == 4000
    assert worker_setting("budget_window_ms", {}) == StreamsConfig(SETTINGS).budget_window_ms


def test_the_static_membership_id_is_the_same_across_restarts_and_differs_between_data_dirs(tmp_path):
    first, again = (StreamsConfig(SETTINGS, data_dir=tmp_path / "a") for _ in range(2))
    other = StreamsConfig(SETTINGS, data_dir=tmp_path / "b")
    assert first.group_instance_id == again.group_instance_id != other.group_instance_id
    assert first.faust_settings()["consumer_group_instance_id"] == first.group_instance_id


def test_tansu_workers_are_not_static_members():
    config = StreamsConfig(Settings(broker="tansu", bootstrap="127.0.0.1:9092"))
    assert "consumer_group_instance_id" not in config.faust_settings()  # Tansu's groups then rejoin forever


def test_an_instance_id_set_by_the_operator_wins():
    config = StreamsConfig.from_env(SETTINGS, {"SWARMLOG_STREAMS_INSTANCE_ID": "streams-eu-1"})
    assert config.faust_settings()["consumer_group_instance_id"] == "streams-eu-1"
