"""Replay: rebuild any state from the log with the same folds the live processes run."""
