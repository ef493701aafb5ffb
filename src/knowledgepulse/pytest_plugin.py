"""The pytest plugin (``-p knowledgepulse.pytest_plugin``): kept importable here; the module is
:mod:`knowledgepulse.integrations.pytest_plugin`, which pytest loads through the entry point."""

from __future__ import annotations

from .integrations.pytest_plugin import *  # noqa: F403
from .integrations.pytest_plugin import __all__ as __all__
