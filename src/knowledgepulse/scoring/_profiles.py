"""Domain weight profiles (SPEC §2): how much each dimension counts in a domain."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..io._settings import read_settings_file

__all__ = [
    "BUILTIN_PROFILES",
    "DomainProfile",
    "ProfileRegistry",
    "get_profile",
    "load_profiles",
    "register_profile",
]

WEIGHT_TOLERANCE = 1e-9
_DIMENSIONS = ("complexity", "novelty", "tool_diversity", "outcome")


@dataclass(frozen=True)
class DomainProfile:
    """Weights of complexity, novelty, tool diversity and outcome; they must sum to 1."""

    name: str
    complexity: float
    novelty: float
    tool_diversity: float
    outcome: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a domain profile needs a non-empty name")
        for dimension in _DIMENSIONS:
            weight = getattr(self, dimension)
            if isinstance(weight, bool) or not isinstance(weight, (int, float)):
                raise ValueError(
                    f"profile {self.name!r}: weight {dimension} must be a number, got {weight!r}"
                )
            if not math.isfinite(weight) or not 0.0 <= weight <= 1.0:
                raise ValueError(
                    f"profile {self.name!r}: weight {dimension} must be in [0, 1], got {weight!r}"
                )
        total = math.fsum(self.weights)
        if abs(total - 1.0) > WEIGHT_TOLERANCE:
            shown = ", ".join(f"{d}={getattr(self, d)}" for d in _DIMENSIONS)
            raise ValueError(
                f"profile {self.name!r}: weights must sum to 1.0 (±1e-9), got {total!r} ({shown})"
            )

    @property
    def weights(self) -> tuple[float, float, float, float]:
        return (self.complexity, self.novelty, self.tool_diversity, self.outcome)

    @classmethod
    def from_mapping(cls, name: str, weights: Mapping[str, Any]) -> DomainProfile:
        """A profile from ``{"complexity": .., "novelty": .., "tool_diversity": .., "outcome": ..}``.

        The short keys ``wC``/``wN``/``wD``/``wO`` of the SPEC's table are accepted too.
        """
        aliases = {"wC": "complexity", "wN": "novelty", "wD": "tool_diversity", "wO": "outcome"}
        normalised = {aliases.get(key, key): value for key, value in weights.items()}
        unknown = sorted(set(normalised) - set(_DIMENSIONS))
        missing = [d for d in _DIMENSIONS if d not in normalised]
        if unknown or missing:
            parts = []
            if missing:
                parts.append(f"missing {', '.join(missing)}")
            if unknown:
                parts.append(f"unknown {', '.join(unknown)}")
            raise ValueError(
                f"profile {name!r}: {'; '.join(parts)} (expected exactly: {', '.join(_DIMENSIONS)})"
            )
        return cls(name=name, **normalised)


BUILTIN_PROFILES: Mapping[str, DomainProfile] = {
    p.name: p
    for p in (
        DomainProfile("default", 0.25, 0.35, 0.15, 0.25),
        DomainProfile("finance", 0.20, 0.25, 0.10, 0.45),
        DomainProfile("code", 0.20, 0.30, 0.30, 0.20),
        DomainProfile("medical", 0.15, 0.20, 0.10, 0.55),
        DomainProfile("customer_service", 0.20, 0.30, 0.20, 0.30),
    )
}


class ProfileRegistry:
    """Domain name -> profile. Exact, case-sensitive lookup; unknown domains use ``default``."""

    def __init__(self, profiles: Mapping[str, DomainProfile] | None = None) -> None:
        self._lock = threading.Lock()
        self._profiles: dict[str, DomainProfile] = dict(BUILTIN_PROFILES)
        if profiles:
            for profile in profiles.values():
                self.register(profile)

    def register(self, profile: DomainProfile) -> DomainProfile:
        if not isinstance(profile, DomainProfile):
            raise TypeError(f"expected a DomainProfile, got {type(profile).__name__}")
        with self._lock:
            self._profiles[profile.name] = profile
        return profile

    def for_domain(self, domain: str) -> DomainProfile:
        """The profile for ``domain``: exact match, else ``default``."""
        return self._profiles.get(domain) or self._profiles["default"]

    def copy(self) -> ProfileRegistry:
        """An independent registry holding the same profiles."""
        with self._lock:
            return ProfileRegistry(dict(self._profiles))

    def __getitem__(self, name: str) -> DomainProfile:
        return self._profiles[name]

    def __contains__(self, name: object) -> bool:
        return name in self._profiles

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._profiles))

    def __len__(self) -> int:
        return len(self._profiles)


_GLOBAL_PROFILES = ProfileRegistry()


def register_profile(
    profile: DomainProfile | str,
    complexity: float | None = None,
    novelty: float | None = None,
    tool_diversity: float | None = None,
    outcome: float | None = None,
) -> DomainProfile:
    """Register a custom domain profile for every scorer created after this call.

    Each :class:`Scorer` takes a copy of the registered profiles when it is created, so a
    scorer already running keeps the weights it started with.

    ``register_profile(DomainProfile("legal", 0.2, 0.2, 0.1, 0.5))`` or
    ``register_profile("legal", 0.2, 0.2, 0.1, 0.5)``. Raises ``ValueError`` when the weights
    do not sum to 1.0 (±1e-9).
    """
    if isinstance(profile, str):
        weights = {
            "complexity": complexity,
            "novelty": novelty,
            "tool_diversity": tool_diversity,
            "outcome": outcome,
        }
        missing = [name for name, value in weights.items() if value is None]
        if missing:
            raise ValueError(f"profile {profile!r}: missing {', '.join(missing)}")
        profile = DomainProfile.from_mapping(profile, weights)
    return _GLOBAL_PROFILES.register(profile)


def get_profile(domain: str) -> DomainProfile:
    """The profile a trace of ``domain`` is scored with (``default`` for unknown domains)."""
    return _GLOBAL_PROFILES.for_domain(domain)


def global_registry() -> ProfileRegistry:
    """The process-wide registry :func:`register_profile` writes to (copy it before use)."""
    return _GLOBAL_PROFILES


def load_profiles(path: str | Path) -> dict[str, DomainProfile]:
    """Read custom profiles from TOML, YAML or JSON.

    The file maps a domain to its four weights, either at the top level or under ``profiles``::

        [profiles.security]
        complexity = 0.3
        novelty = 0.3
        tool_diversity = 0.2
        outcome = 0.2
    """
    path = Path(path)
    data = read_settings_file(path, "profile")
    if isinstance(data, Mapping) and isinstance(data.get("profiles"), Mapping):
        data = data["profiles"]
    if not isinstance(data, Mapping) or not data:
        raise ValueError(
            f"{path}: expected a table of profiles, e.g. [profiles.NAME] with 4 weights"
        )
    profiles: dict[str, DomainProfile] = {}
    for name, weights in data.items():
        if not isinstance(weights, Mapping):
            raise ValueError(f"{path}: profile {name!r} must be a table of weights")
        try:
            profiles[str(name)] = DomainProfile.from_mapping(str(name), weights)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    return profiles
