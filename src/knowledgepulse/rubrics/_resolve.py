"""Finding a rubric by name, import path or file path (``kp eval --rubric``)."""

from __future__ import annotations

import builtins
import difflib
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Collection
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from .._errors import KnowledgePulseError
from ._rubric import Rubric

__all__ = ["BUILTIN_RUBRICS", "RubricLoadError", "register_rubric", "resolve_rubric"]

#: Rubric names :func:`resolve_rubric` knows, each mapped to its import path.
BUILTIN_RUBRICS: dict[str, str] = {
    "scheduling": "knowledgepulse.rubrics.scheduling:SCHEDULING_RUBRIC",
    "agent": "knowledgepulse.behaviours:AGENT_RUBRIC",
}
# A rubric file of settings (the agent rubric's weights and parameters), not Python code.
_SETTINGS_SUFFIXES = (".toml", ".yaml", ".yml", ".json")
# What reads such a file, named by import path as the built-ins are: the agent rubric is made
# of the behaviour checks, a package that builds on this one (so no import of it here).
_SETTINGS_LOADER = "knowledgepulse.behaviours:load_agent_rubric"
_registered: dict[str, Rubric] = {}


class RubricLoadError(KnowledgePulseError, ValueError):
    """A rubric could not be found or loaded. The message says why; for a mistake in the
    rubric's own code it gives ``file:line``, Python's error (with its "Did you mean"
    suggestion) and the offending line.
    """


def register_rubric(name: str, rubric: Rubric) -> None:
    """Make ``rubric`` resolvable by ``name`` (e.g. for ``kp eval --rubric NAME``)."""
    if not isinstance(rubric, Rubric):
        raise TypeError(f"expected a Rubric, got {type(rubric).__name__}")
    _registered[name] = rubric


def resolve_rubric(spec: str | Rubric) -> Rubric:
    """A rubric from a built-in or registered name (``"scheduling"``, ``"agent"``), an import
    path (``"package.module:ATTRIBUTE"``), a file path (``"rubrics.py:ATTRIBUTE"``) or a file
    of settings for the agent rubric (``agent.toml``, ``.yaml``, ``.json``: see
    :func:`knowledgepulse.behaviours.agent_rubric`).

    The attribute may be a :class:`Rubric` or a function of no arguments returning one.
    Raises :class:`RubricLoadError` (a ``ValueError``) with the reason when nothing fits: an
    unknown name, a module that cannot be imported, a missing attribute (with the Rubric
    objects the module has), a file without ``:ATTRIBUTE``, or an error raised by the rubric's
    own code, located in it.
    """
    if isinstance(spec, Rubric):
        return spec
    if spec in _registered:
        return _registered[spec]
    if spec in BUILTIN_RUBRICS:
        spec = BUILTIN_RUBRICS[spec]
    if spec.lower().endswith(_SETTINGS_SUFFIXES):
        module_name, _, loader = _SETTINGS_LOADER.partition(":")
        load: Callable[[str], Rubric] = getattr(importlib.import_module(module_name), loader)
        return load(spec)
    module_name, colon, attribute = spec.rpartition(":")
    if not colon:
        module_name, attribute = spec, ""
    if not attribute and (not colon or _is_file(module_name)):
        _refuse_without_attribute(spec, module_name)
    if not module_name or not attribute:
        _refuse_unknown(spec)
    if _is_file(module_name):
        module = _import_file(module_name, spec)
        user_files: Collection[str] = {module_name}
    else:
        module, user_files = _import_module(module_name, spec)
    target: object = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise RubricLoadError(
                f"{module_name!r} has no attribute {attribute!r} ({_found_rubrics(module)})"
            ) from None
    if not isinstance(target, Rubric) and callable(target):
        try:
            target = target()
        except (Exception, SystemExit) as exc:
            raise RubricLoadError(_in_user_code(spec, exc, user_files)) from exc
    if not isinstance(target, Rubric):
        raise RubricLoadError(f"{spec!r} is a {type(target).__name__}, not a Rubric")
    return target


def _refuse_without_attribute(spec: str, module_name: str) -> NoReturn:
    """A file or module named without ``:ATTRIBUTE``: say which rubrics it has."""
    if _is_file(module_name):
        module = _import_file(module_name, spec)
    else:
        try:
            found = importlib.util.find_spec(module_name)
        except Exception:  # not a module name at all; the message below says what fits
            found = None
        if found is None:
            _refuse_unknown(spec)
        module, _ = _import_module(module_name, spec)
    raise RubricLoadError(
        f"{spec!r}: add :ATTRIBUTE to name the rubric in it ({_found_rubrics(module)})"
    )


def _refuse_unknown(spec: str) -> NoReturn:
    names = sorted({*BUILTIN_RUBRICS, *_registered})
    close = difflib.get_close_matches(spec, names, n=1)
    hint = f"did you mean {close[0]!r}? Otherwise use" if close else "use"
    raise RubricLoadError(
        f"unknown rubric {spec!r}: {hint} a rubric name ({', '.join(names)}) or an import "
        "path like 'package.module:RUBRIC' or 'path/to/file.py:RUBRIC'"
    )


def _is_file(module_name: str) -> bool:
    return module_name.endswith(".py") or "/" in module_name or "\\" in module_name


def _found_rubrics(module: ModuleType) -> str:
    names = [
        name
        for name, value in vars(module).items()
        if isinstance(value, Rubric) and not name.startswith("_")
    ]
    return f"found: {', '.join(names)}" if names else "it defines no Rubric"


def _import_file(module_name: str, spec: str) -> ModuleType:
    file = Path(module_name)
    if not file.is_file():
        raise RubricLoadError(f"no rubric file {module_name!r}")
    unique = f"_kp_rubric_{abs(hash(file.resolve()))}"
    if unique in sys.modules:
        return sys.modules[unique]
    module_spec = importlib.util.spec_from_file_location(unique, file)
    if module_spec is None or module_spec.loader is None:
        raise RubricLoadError(f"cannot import {module_name!r}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[unique] = module
    try:
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        del sys.modules[unique]
        raise RubricLoadError(_in_user_code(spec, exc, {module_name})) from exc
    except BaseException:
        del sys.modules[unique]
        raise
    return module


def _import_module(module_name: str, spec: str) -> tuple[ModuleType, Collection[str]]:
    """The module and the file that holds its code (where its errors are located)."""
    try:
        # Finding a submodule imports its parent packages, whose code may fail too.
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError) as exc:
        raise RubricLoadError(f"cannot import {module_name!r}: {exc}") from None
    except (Exception, SystemExit) as exc:
        raise RubricLoadError(_in_user_code(spec, exc, ())) from exc
    if found is None:
        raise RubricLoadError(f"cannot import {module_name!r}: No module named {module_name!r}")
    user_files = {found.origin} if found.origin else set()
    try:
        return importlib.import_module(module_name), user_files
    except ImportError as exc:
        raise RubricLoadError(f"cannot import {module_name!r}: {exc}") from None
    except (Exception, SystemExit) as exc:
        raise RubricLoadError(_in_user_code(spec, exc, user_files)) from exc


def _in_user_code(spec: str, exc: BaseException, user_files: Collection[str]) -> str:
    """``loading SPEC failed: FILE:LINE: Error: message`` and the offending line.

    The location is the last frame in the rubric's own file, not inside the library it called,
    since that is the line to fix. Python's own wording is kept, "Did you mean" included.
    """
    report = traceback.TracebackException.from_exception(exc)
    lines = "".join(report.format_exception_only()).rstrip("\n").splitlines()
    if isinstance(exc, SyntaxError):
        # Python's form is '  File "x.py", line 3', the code, a caret line, then the error.
        if lines and lines[0].lstrip().startswith("File "):
            lines = lines[1:]
        where = f"{exc.filename}:{exc.lineno}" if exc.filename else None
        message, code = lines[-1], lines[:-1]
    else:
        message = "\n".join(lines) + _suggestion(exc, " ".join(lines))
        frames = [f for f in report.stack if _is_one_of(f.filename, user_files)]
        frames = frames or [f for f in report.stack if not f.filename.startswith("<")]
        frame = frames[-1] if frames else None
        where = f"{frame.filename}:{frame.lineno}" if frame is not None else None
        code = [f"    {frame.line}"] if frame is not None and frame.line else []
    located = f"{where}: {message}" if where else message
    return "\n".join([f"loading the rubric {spec!r} failed: {located}", *code])


def _is_one_of(filename: str, files: Collection[str]) -> bool:
    return any(os.path.abspath(filename) == os.path.abspath(file) for file in files)


def _suggestion(exc: BaseException, shown: str) -> str:
    """Python's "Did you mean" hint, which ``traceback`` gives only from Python 3.12 on."""
    if "Did you mean" in shown:
        return ""
    name = getattr(exc, "name", None)
    if not isinstance(name, str):
        return ""
    candidates: list[str] = []
    if isinstance(exc, AttributeError):
        candidates = dir(getattr(exc, "obj", None))
    elif isinstance(exc, NameError):
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            frame = tb.tb_frame
            candidates = [*frame.f_locals, *frame.f_globals, *dir(builtins)]
    close = difflib.get_close_matches(name, candidates, n=1)
    return f". Did you mean: {close[0]!r}?" if close else ""
