from __future__ import annotations

import re
from pathlib import Path

import pytest

import knowledgepulse as kp
from _helpers import make_trace
from knowledgepulse.scoring._profiles import ProfileRegistry


def test_builtin_profiles_match_the_spec() -> None:
    assert {name: p.weights for name, p in kp.BUILTIN_PROFILES.items()} == {
        "default": (0.25, 0.35, 0.15, 0.25),
        "finance": (0.20, 0.25, 0.10, 0.45),
        "code": (0.20, 0.30, 0.30, 0.20),
        "medical": (0.15, 0.20, 0.10, 0.55),
        "customer_service": (0.20, 0.30, 0.20, 0.30),
    }


def test_weights_not_summing_to_one_are_refused() -> None:
    with pytest.raises(
        ValueError, match=r"profile 'legal': weights must sum to 1.0 \(±1e-9\), got 0.9"
    ):
        kp.DomainProfile("legal", 0.2, 0.2, 0.2, 0.3)


def test_tolerance_is_1e_9() -> None:
    kp.DomainProfile("ok", 0.25, 0.35, 0.15, 0.25 + 5e-10)
    with pytest.raises(ValueError):
        kp.DomainProfile("bad", 0.25, 0.35, 0.15, 0.25 + 5e-9)


@pytest.mark.parametrize("weight", [-0.1, 1.5, float("nan"), "0.3", True])
def test_each_weight_checked(weight: object) -> None:
    with pytest.raises(ValueError, match="weight complexity"):
        kp.DomainProfile("x", weight, 0.35, 0.15, 0.25)  # type: ignore[arg-type]


def test_register_profile_is_used_by_scorers() -> None:
    registry = ProfileRegistry()
    registry.register(kp.DomainProfile("legal", 0.0, 0.0, 0.0, 1.0))
    result = kp.Scorer(embedder=None, profiles=registry).score(
        make_trace(domain="legal", confidence=0.8)
    )
    assert result.profile == "legal"
    assert result.value == pytest.approx(0.8)


def test_register_profile_globally() -> None:
    profile = kp.register_profile("kp-test-domain", 0.1, 0.2, 0.3, 0.4)
    assert kp.get_profile("kp-test-domain") is profile
    assert (
        kp.Scorer(embedder=None).score(make_trace(domain="kp-test-domain")).profile
        == "kp-test-domain"
    )
    with pytest.raises(ValueError, match=r"must sum to 1\.0"):
        kp.register_profile("kp-bad", 0.5, 0.5, 0.5, 0.5)
    with pytest.raises(ValueError, match="missing outcome"):
        kp.register_profile("kp-bad", 0.5, 0.5, 0.0)


def test_unknown_domain_uses_default() -> None:
    assert kp.get_profile("astrology").name == "default"


def test_from_mapping_accepts_short_keys_and_names_bad_ones() -> None:
    p = kp.DomainProfile.from_mapping("x", {"wC": 0.25, "wN": 0.25, "wD": 0.25, "wO": 0.25})
    assert p.weights == (0.25, 0.25, 0.25, 0.25)
    with pytest.raises(ValueError, match="missing outcome; unknown speed"):
        kp.DomainProfile.from_mapping(
            "x", {"complexity": 0.5, "novelty": 0.25, "tool_diversity": 0.25, "speed": 0}
        )


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (
            "p.toml",
            "[profiles.security]\ncomplexity = 0.3\nnovelty = 0.3\ntool_diversity = 0.2\noutcome = 0.2\n",
        ),
        (
            "p.yaml",
            "security:\n  complexity: 0.3\n  novelty: 0.3\n  tool_diversity: 0.2\n  outcome: 0.2\n",
        ),
        (
            "p.json",
            '{"profiles": {"security": {"complexity": 0.3, "novelty": 0.3, "tool_diversity": 0.2, "outcome": 0.2}}}',
        ),
    ],
)
def test_load_profiles(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    profiles = kp.load_profiles(path)
    assert profiles["security"].weights == (0.3, 0.3, 0.2, 0.2)


def test_load_profiles_bad_sum_names_file_and_profile(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        "[profiles.security]\ncomplexity = 0.3\nnovelty = 0.3\ntool_diversity = 0.3\noutcome = 0.3\n"
    )
    with pytest.raises(ValueError, match=r"p.toml: profile 'security': weights must sum to 1.0"):
        kp.load_profiles(path)
    other = tmp_path / "p.ini"
    other.write_text("x")
    with pytest.raises(ValueError, match="unsupported profile file type"):
        kp.load_profiles(other)


@pytest.mark.parametrize(
    ("name", "text"),
    [("p.yaml", "profiles: [a\n  b: {"), ("p.json", '{"a":'), ("p.toml", "x = ")],
)
def test_a_profiles_file_that_does_not_parse_names_itself(
    tmp_path: Path, name: str, text: str
) -> None:
    """Every parser's error (YAML's is no ValueError) is one ValueError naming the file."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: cannot parse: "):
        kp.load_profiles(path)


def test_kp_score_refuses_a_broken_yaml_profiles_file_as_a_usage_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from knowledgepulse.cli import app

    path = tmp_path / "p.yaml"
    path.write_text("profiles: [a\n  b: {")
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    result = CliRunner().invoke(app, ["score", str(trace), "--profiles", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}: cannot parse: " in result.output
    assert "internal error" not in result.output
