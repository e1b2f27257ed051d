"""Writing a report's files by the C++ side's rules (runtime/io/output_file.h): every output path
is checked before any work, and each file is written whole, to a temporary file renamed over the
target. Only a regular file, or a path that does not exist yet, is replaced: renamed over
/dev/null or a FIFO, the temporary file would replace the machine's device with a regular file."""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from .records import RecordError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _dir_problem(directory: Path) -> str | None:
    try:
        st = os.stat(directory)
    except OSError as e:
        return f"its directory '{directory}' cannot be used: {e.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"'{directory}' is {_kind(st.st_mode)}"
    try:  # a file made and removed: access() answers yes for root on read-only mounts and /proc
        fd, probe = tempfile.mkstemp(prefix=".dlbench-", dir=directory)
    except OSError as e:
        return f"no file can be made in its directory '{directory}': {e.strerror}"
    os.close(fd)
    os.unlink(probe)
    return None


def output_problem(path: str | Path) -> str | None:
    """Why `path` cannot take a file written whole, or None: an existing target that is not a
    regular file, or a directory that does not exist or cannot be written."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return _dir_problem(path.parent)
    except OSError as e:
        return f"it cannot be used: {e.strerror}"
    if not stat.S_ISREG(st.st_mode):
        return f"it is {_kind(st.st_mode)}; dlbench writes only regular files"
    return _dir_problem(Path(os.path.realpath(path)).parent)


def check_output(path: str | Path, what: str) -> None:
    """RecordError (one line, exit 2 at the command line) when output_problem finds one."""
    problem = output_problem(path)
    if problem:
        raise RecordError(f"{what} '{path}': {problem}")


def write_text_atomically(path: str | Path, text: str) -> None:
    """`text` into `path`, whole or not at all; a link's target is replaced, not the link."""
    target = Path(os.path.realpath(path))
    check_output(target, "cannot write")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".dlbench-", dir=target.parent)
    except OSError as e:
        raise RecordError(f"cannot write '{path}': {e.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode) if target.exists()
                 else 0o666 & ~mask)
        os.replace(tmp, target)
    except OSError as e:
        raise RecordError(f"cannot write '{path}': {e.strerror}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
