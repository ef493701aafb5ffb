"""How a rubric's outcome agrees with the success the source recorded (a benchmark's reward).

A benchmark such as tau-bench states whether each run succeeded; ``kp import`` keeps it in
``metadata.success``. Setting the rubric's ``successful_completion`` against it, run by run,
tells how far the rubric can be trusted where no such reward exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict
from rich.table import Table

from ._case import Case
from ._criterion import EvaluationResult, OutcomeType

__all__ = ["OutcomeAgreement", "source_success"]


def source_success(case: Case) -> bool | None:
    """The success the case's trace carries from its source, or ``None`` when it has no trace
    or its success was not given by the source (defaulted or overridden on import)."""
    trace = case.trace
    if trace is None:
        return None
    imported = (trace.metadata.model_extra or {}).get("kp_import")
    if isinstance(imported, Mapping):
        for key in ("defaulted", "overridden"):
            listed = imported.get(key)
            if isinstance(listed, (list, tuple)) and "success" in listed:
                return None
    return trace.metadata.success


class OutcomeAgreement(BaseModel):
    """The confusion matrix of ``successful_completion`` (rubric) against the source's success.

    ``both``: the rubric and the source say success; ``neither``: both say failure;
    ``rubric_only`` and ``source_only``: they disagree. Cases without a source success are not
    counted. A case whose outcome is undetermined counts as not successful.
    """

    model_config = ConfigDict(validate_assignment=False)

    both: int = 0
    rubric_only: int = 0
    source_only: int = 0
    neither: int = 0

    def add(self, case: Case, result: EvaluationResult) -> None:
        """Count one evaluated case in (nothing when its source gave no success)."""
        truth = source_success(case)
        if truth is None:
            return
        success = result.outcome_type is OutcomeType.SUCCESSFUL_COMPLETION
        if success and truth:
            self.both += 1
        elif success:
            self.rubric_only += 1
        elif truth:
            self.source_only += 1
        else:
            self.neither += 1

    @property
    def count(self) -> int:
        return self.both + self.rubric_only + self.source_only + self.neither

    @property
    def agreement(self) -> float | None:
        """The share of the counted cases where the two agree; ``None`` when none was counted."""
        return round((self.both + self.neither) / self.count, 12) if self.count else None

    def to_dict(self) -> dict[str, Any]:
        return {**self.model_dump(), "count": self.count, "agreement": self.agreement}

    def render(self) -> Table:
        """The matrix as a rich table, its title giving the agreement."""
        agreed = self.both + self.neither
        table = Table(
            title=f"successful_completion vs the source's success: {agreed}/{self.count} agree"
            + (f" ({self.agreement:.1%})" if self.agreement is not None else "")
        )
        table.add_column("")
        table.add_column("source: success", justify="right")
        table.add_column("source: failure", justify="right")
        table.add_row("rubric: successful_completion", str(self.both), str(self.rubric_only))
        table.add_row("rubric: other outcome", str(self.source_only), str(self.neither))
        return table

    def __rich__(self) -> Table:
        return self.render()
