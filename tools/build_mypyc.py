"""``make install``'s last step: the modules of ``machinery.COMPILED`` compiled with mypyc.

``python tools/build_mypyc.py [--if-stale]``: writes each module's C extension, and the mypyc
runtime it needs, to ``build/mypyc/machinery/``, then the stamp ``build/mypyc/machinery/BUILT``;
with ``--if-stale`` (``make install``) nothing when the stamp is newer than the compiled sources,
this script and the venv's install stamp (the one list of modules is ``machinery.COMPILED``). The
package looks there first (machinery/__init__.py) unless ``KPLANE_PURE_PYTHON=1`` or a source
is newer than the stamp; the .py files stay where they are and are used otherwise.

Without a C compiler, or if mypyc fails, it prints one line and exits 0: kplane then runs on the
pure-Python modules (the unit test tests/unit/test_mypyc.py fails where a build was expected).
Why these modules and not others: docs/performance.md, "mypyc".
"""

from __future__ import annotations

import contextlib
import io
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machinery import COMPILED, COMPILED_DIR, COMPILED_STAMP, compiled_is_fresh  # noqa: E402

_TEMP = ROOT / "build" / "mypyc-temp"
_VENV_STAMP = ROOT / ".venv" / ".installed"  # the Makefile's: mypy (mypyc) may have changed with it


def build() -> str | None:
    """None when built, else why not (one line)."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        return "no C compiler (cc/gcc)"
    try:
        from mypyc.build import mypycify
        from setuptools import setup  # type: ignore[import-untyped]
    except ImportError as e:
        return f"{e.name} is not installed"
    shutil.rmtree(COMPILED_DIR, ignore_errors=True)
    sources = [f"machinery/{name}.py" for name in COMPILED]
    log = io.StringIO()
    try:
        with contextlib.chdir(ROOT), contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            # One group per module: each module's runtime library sits beside it, inside the package.
            # --no-warn-unused-configs: pyproject's mypy sections name modules this run does not read.
            extensions = mypycify(["--no-warn-unused-configs", *sources], separate=True,
                                  target_dir=str(_TEMP / "c"))
            setup(name="kplane-mypyc", ext_modules=extensions, script_args=[
                "build_ext", "--build-lib", str(COMPILED_DIR.parent), "--build-temp", str(_TEMP)])
    except (Exception, SystemExit) as e:  # setuptools exits with SystemExit on a compiler error
        lines = [line for line in log.getvalue().splitlines() if "error:" in line] or [repr(e)]
        return lines[0][:200]
    COMPILED_STAMP.touch()
    return None


def main() -> None:
    if "--if-stale" in sys.argv[1:] and compiled_is_fresh(Path(__file__).resolve(), _VENV_STAMP):
        return
    why = build()
    if why is None:
        print(f"mypyc: compiled {', '.join(COMPILED)} into {COMPILED_DIR.relative_to(ROOT)}")
    else:
        print(f"mypyc: not built ({why}); kplane runs on the pure-Python modules")


if __name__ == "__main__":
    main()
