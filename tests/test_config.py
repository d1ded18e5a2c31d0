"""Configuration: every BOSUN_* parsed once; a bad value names its variable and what it accepts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bosun.server.config import Config, ConfigError
from tests.helpers_proc import BOSUN, env_for


def test_defaults_need_no_environment(tmp_path: Path) -> None:
    config = Config.from_env({}, home=tmp_path)
    assert config.home == tmp_path and config.port == 8790 and config.policies == [] and config.token is None
    assert config.invariants_path == tmp_path / "invariants.toml"


def test_every_variable_is_parsed(tmp_path: Path) -> None:
    env = {"BOSUN_HOME": str(tmp_path), "BOSUN_PORT": "0", "BOSUN_MODEL_THREADS": "2", "BOSUN_TOOLS": "route, plan",
           "BOSUN_POLICIES": f"{tmp_path}/a:{tmp_path}/b", "BOSUN_ROOTS": f"{tmp_path}/r1;{tmp_path}/r2",
           "BOSUN_PRUNE_MODE": "balanced", "BOSUN_REDACT_EXTRA": "a=x+\nb=y+", "BOSUN_TOKEN": "s3cret"}
    config = Config.from_env(env)
    assert config.port == 0 and config.model_threads == 2 and config.tools == ["route", "plan"]
    assert config.policies == [tmp_path / "a", tmp_path / "b"] and config.roots == [tmp_path / "r1", tmp_path / "r2"]
    assert config.prune_mode == "balanced" and config.redact_extra == ["a=x+", "b=y+"] and config.token == "s3cret"
    assert config.invariants_path == tmp_path / "r1" / ".bosun" / "invariants.toml"
    assert Config.from_env(env, port=9000).port == 9000  # a CLI flag overrides the environment


@pytest.mark.parametrize(("variable", "value", "accepts"), [
    ("BOSUN_PORT", "http", "an integer"),
    ("BOSUN_PORT", "70000", "<= 65535"),
    ("BOSUN_MODEL_THREADS", "0", ">= 1"),
    ("BOSUN_MODEL_TIMEOUT_S", "soon", "a number"),
    ("BOSUN_PRUNE_MODE", "fast", "cache_ttl, conservative, balanced, aggressive"),
])
def test_a_bad_value_names_the_variable(variable: str, value: str, accepts: str) -> None:
    with pytest.raises(ConfigError) as exc:
        Config.from_env({variable: value})
    assert exc.value.variable == variable and variable in str(exc.value) and accepts in str(exc.value)


def test_the_cli_reports_a_bad_value_in_one_line(tmp_path: Path) -> None:
    res = subprocess.run([*BOSUN, "serve", "--port", "0"], env=env_for(tmp_path, BOSUN_MODEL_THREADS="many"),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip() == "bosun: BOSUN_MODEL_THREADS='many' is not valid: an integer >= 1"
