"""The cloud-like disk of the benchmark: ``fsyncdelay.c`` built and loaded into a process.

``fsyncdelay.c`` (next to this file), loaded with ``LD_PRELOAD``, sleeps
``FSYNC_DELAY_MS`` milliseconds in ``fsync`` and ``fdatasync`` before the real call: a
flush then costs what it costs on cloud block storage (2-5 ms) rather than this
machine's (0.2-0.3 ms on the project's VM). :func:`build` compiles it with the C
compiler found (``$CC``, then ``cc``, ``gcc``, ``clang``) into ``benchmarks/.build/``
(rebuilt when the source is newer); :func:`environment` is what a child process needs
in its environment to run on such a disk. The delay applies to a whole process, so a
benchmark runs each disk's workloads in a process of its own (:mod:`disks`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "fsyncdelay.c"
LIBRARY = HERE / ".build" / "libfsyncdelay.so"


def compiler() -> str | None:
    """The C compiler to build with: ``$CC`` when set and found, else the first of
    ``cc``, ``gcc``, ``clang`` on ``PATH``; None when there is none."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and (found := shutil.which(name)) is not None:
            return found
    return None


def build(library: Path = LIBRARY) -> tuple[Path | None, str]:
    """Compile ``fsyncdelay.c`` into ``library`` unless it is up to date.

    Returns:
        ``(path of the shared library, how it was had)``, or ``(None, why not)`` when
        there is no C compiler or the compilation failed (the compiler's last lines).
    """
    if library.exists() and library.stat().st_mtime >= SOURCE.stat().st_mtime:
        return library, f"{library.name}, built before from {SOURCE.name}"
    cc = compiler()
    if cc is None:
        return None, "no C compiler found ($CC, cc, gcc, clang) to build benchmarks/fsyncdelay.c"
    library.parent.mkdir(parents=True, exist_ok=True)
    cmd = [cc, "-shared", "-fPIC", "-O2", "-o", str(library), str(SOURCE), "-ldl"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if out.returncode != 0:
        tail = " | ".join((out.stderr or out.stdout).strip().splitlines()[-3:])
        return None, f"{' '.join(cmd)} failed (exit {out.returncode}): {tail}"
    return library, f"built with {cc}"


def environment(library: Path, delay_ms: float) -> dict[str, str]:
    """The variables a child process needs to flush ``delay_ms`` milliseconds slower:
    ``LD_PRELOAD`` (``library`` first, any preload already set after it) and
    ``FSYNC_DELAY_MS``; merge them into its environment."""
    preload = " ".join(p for p in (str(library), os.environ.get("LD_PRELOAD", "")) if p)
    return {"LD_PRELOAD": preload, "FSYNC_DELAY_MS": f"{delay_ms:g}"}
