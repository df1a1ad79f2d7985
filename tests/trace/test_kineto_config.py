"""trace.kineto_config: kineto options through the file KINETO_CONFIG names, and Capture's
`cupti_buffers`."""

from __future__ import annotations

import pytest

from membound.errors import BadInput
from membound.trace import kineto_config
from membound.trace.capture import Capture


def test_options_go_to_a_file_that_kineto_config_then_names(tmp_path):
    env: dict[str, str] = {}
    got = kineto_config.request({"CUPTI_PER_THREAD_BUFFER_ENABLED": "true"}, tmp_path, env)
    path = tmp_path / "kineto.conf"
    assert env == {"KINETO_CONFIG": str(path)}
    assert path.read_text() == "CUPTI_PER_THREAD_BUFFER_ENABLED=true\n"
    assert got == {"options": {"CUPTI_PER_THREAD_BUFFER_ENABLED": "true"}, "file": str(path),
                   "user_file": None}  # fmt: skip


def test_the_users_own_kineto_file_is_kept_and_ours_follow_it(tmp_path):
    """The user's options stay (kineto reads one file); ours come after them."""
    mine = tmp_path / "user.conf"
    mine.write_text("ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB=64\nVERBOSE_LOG_LEVEL=1")
    env = {"KINETO_CONFIG": str(mine)}
    got = kineto_config.request({"CUPTI_PER_THREAD_BUFFER_ENABLED": "true"}, tmp_path / "out", env)
    ours = tmp_path / "out" / "kineto.conf"
    assert env["KINETO_CONFIG"] == str(ours) and got["user_file"] == str(mine)
    assert ours.read_text().splitlines() == [
        "ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB=64", "VERBOSE_LOG_LEVEL=1",
        "CUPTI_PER_THREAD_BUFFER_ENABLED=true",
    ]  # fmt: skip
    assert mine.read_text().endswith("VERBOSE_LOG_LEVEL=1")  # the user's file is not touched


def test_a_file_that_cannot_be_read_leaves_the_variable_alone(tmp_path):
    env = {"KINETO_CONFIG": str(tmp_path / "missing.conf")}
    got = kineto_config.request({"CUPTI_PER_THREAD_BUFFER_ENABLED": "true"}, tmp_path, env)
    assert env == {"KINETO_CONFIG": str(tmp_path / "missing.conf")}
    assert got["file"] is None and "FileNotFoundError" in got["why"]
    assert not (tmp_path / "kineto.conf").exists()


def test_capture_refuses_an_unknown_buffer_mode(tmp_path):
    with pytest.raises(BadInput, match="give one of shared, per-thread"):
        Capture(out=tmp_path, cupti_buffers="pooled")


def test_capture_asks_for_per_thread_buffers_once_and_says_so_in_its_meta(tmp_path, monkeypatch):
    monkeypatch.delenv("KINETO_CONFIG", raising=False)
    cap = Capture(out=tmp_path, cupti_buffers="per-thread")
    cap._ask_kineto()
    cap._ask_kineto()  # once a capture
    meta = cap._meta()["kineto_config"]
    assert meta["options"] == {"CUPTI_PER_THREAD_BUFFER_ENABLED": "true"}
    assert meta["file"] == str(tmp_path / "kineto.conf")
    import os

    assert os.environ["KINETO_CONFIG"] == meta["file"]
    assert (tmp_path / "kineto.conf").read_text() == "CUPTI_PER_THREAD_BUFFER_ENABLED=true\n"


def test_capture_leaves_kineto_alone_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv("KINETO_CONFIG", raising=False)
    cap = Capture(out=tmp_path)
    cap._ask_kineto()
    assert cap._meta()["kineto_config"] is None and "KINETO_CONFIG" not in __import__("os").environ
