"""Writing a report's files by the C++ side's rules (runtime/io/output_file.h): every output path
is checked before any work, and each file is written whole, to a temporary file renamed over the
target. Only a regular file, or a path that does not exist yet, is replaced: renamed over
/dev/null or a FIFO, the temporary file would replace the machine's device with a regular file."""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Callable

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


def directory_problem(path: str | Path) -> str | None:
    """Why `path` cannot be a directory files are written into, or None: it exists and is not a
    directory, or neither it nor the nearest directory above it that exists can take a file."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        parent = path.parent
        while parent != parent.parent and not os.path.lexists(parent):
            parent = parent.parent
        return _dir_problem(parent)
    except OSError as e:
        return f"it cannot be used: {e.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"it is {_kind(st.st_mode)}, not a directory"
    return _dir_problem(path)


def check_directory(path: str | Path, what: str, create: bool = True) -> None:
    """RecordError (one line, exit 2) when `path` cannot take files (directory_problem); made,
    with its parents, when `create`. A plots folder that is a regular file was a traceback
    (FileExistsError) after the first plot was drawn."""
    problem = directory_problem(path)
    if problem:
        raise RecordError(f"{what} directory '{path}': {problem}")
    if create:
        try:
            Path(path).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RecordError(f"{what} directory '{path}': {e.strerror}") from None


def write_atomically(path: str | Path, write: Callable[[IO], None], what: str = "cannot write",
                     binary: bool = False) -> None:
    """What write(file) writes, into `path`, whole or not at all: to a temporary file of a name
    no one else has (mkstemp: a FIFO or directory put at a fixed temporary name would block or
    fail the write), renamed over the target; a link's target is replaced, not the link."""
    target = Path(os.path.realpath(path))
    check_output(target, what)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".dlbench-", dir=target.parent)
    except OSError as e:
        raise RecordError(f"{what} '{path}': {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode) if target.exists()
                 else 0o666 & ~mask)
        os.replace(tmp, target)
    except OSError as e:
        raise RecordError(f"{what} '{path}': {e.strerror}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text_atomically(path: str | Path, text: str) -> None:
    """`text` into `path`, whole or not at all (write_atomically)."""
    write_atomically(path, lambda f: f.write(text))
