"""Log lines: a flood of one message (a broker away) becomes one line a window, saying how many were held back."""

from __future__ import annotations

import io
import logging

from swarmlog.logs import Repeats


def _record(message: str, name: str = "aiokafka.conn", level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def test_a_repeated_message_passes_once_a_window_and_says_how_many_were_held_back() -> None:
    now = [0.0]
    repeats = Repeats(window_s=10, clock=lambda: now[0])

    passed = []
    for second in range(25):  # 4 a second for 25 s: 100 records
        for _ in range(4):
            now[0] = second
            record = _record("Unable to connect to node %s")
            if repeats.filter(record):
                passed.append(record.getMessage() if record.args else record.msg)

    assert len(passed) == 3  # at 0 s, 10 s and 20 s
    assert passed[0] == "Unable to connect to node %s"
    assert passed[1] == "Unable to connect to node %s (39 more like this in the last 10 s)"


def test_other_messages_levels_and_loggers_are_their_own_kinds() -> None:
    repeats = Repeats(window_s=10, clock=lambda: 0.0)
    assert repeats.filter(_record("a"))
    assert repeats.filter(_record("b"))
    assert repeats.filter(_record("a", level=logging.WARNING))
    assert not repeats.filter(_record("a"))


def test_swarmlog_s_own_lines_are_never_held_back() -> None:
    repeats = Repeats(window_s=10, clock=lambda: 0.0)
    assert all(repeats.filter(_record("dead-lettered %s", name="swarmlog.deadletter")) for _ in range(5))


def test_the_streams_worker_holds_back_repeats_on_the_handlers_faust_sets_up():
    from swarmlog.streams.app.run import Worker

    worker = object.__new__(Worker)  # only its logging hook runs: no app, no loop
    worker.spinner = None
    root = logging.Logger("root")
    root.addHandler(logging.StreamHandler(io.StringIO()))
    worker.on_setup_root_logger(root, logging.INFO)
    assert [type(f) for f in root.handlers[0].filters] == [Repeats]
