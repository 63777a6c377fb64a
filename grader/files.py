"""Reading files a student controls: regular files only, never through a link, size-capped.

A collection by git, rsync -a or tar keeps symlinks, FIFOs and device files. `read_regular`
refuses all of them before reading a byte, so a link cannot hand the grader another student's
notebook or a system file, and a FIFO or /dev/zero cannot block it or fill its memory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_FILE_MODE = 0o640  # what the grader writes: the instructor's group may read, nobody else
PRIVATE_DIR_MODE = 0o750


class UnsafeFile(OSError):
    """The path is not a regular file the grader may read; str() is a one-line reason."""


def refusal(path: Path) -> str | None:
    """Why `path` is not a plain regular file (a link, folder, FIFO, device...), or None if it is.

    >>> refusal(Path("/dev/null"))
    'it is a device, not a regular file'
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "it does not exist"
    except OSError as error:
        return f"it cannot be read ({error.strerror or error})"
    return _kind_problem(mode)


def _kind_problem(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "it is a symbolic link; submit the file itself"
    if stat.S_ISDIR(mode):
        return "it is a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "it is a FIFO (named pipe), not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "it is a device, not a regular file"
    return "it is not a regular file"


def read_regular(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them.

    Checked with lstat, opened with O_NOFOLLOW | O_NONBLOCK (a FIFO cannot block the open), then
    checked again with fstat on the open file. Raises UnsafeFile with a one-line reason.
    """
    path = Path(path)
    problem = refusal(path)
    if problem is not None:
        raise UnsafeFile(f"{path.name}: {problem}")
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise UnsafeFile(f"{path.name}: it cannot be opened ({error.strerror or error})") from None
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        problem = _kind_problem(info.st_mode)
        if problem is not None:
            raise UnsafeFile(f"{path.name}: {problem}")
        if info.st_size > limit:
            raise UnsafeFile(f"{path.name}: it is larger than {_size(limit)}")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFile(f"{path.name}: it is larger than {_size(limit)}")
    return data


def _size(limit: int) -> str:
    return f"{limit // 2**20} MB" if limit >= 2**20 else f"{limit} bytes"


def write_private(path: Path, data: bytes | str) -> None:
    """Write `data` to `path` atomically, readable by owner and group only (0o640, folders 0o750).

    A killed run never leaves half a file: the data goes to a temporary file that replaces `path`.
    """
    make_private_dirs(path.parent)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(
        temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE
    )
    with os.fdopen(descriptor, "wb") as handle:
        os.fchmod(handle.fileno(), PRIVATE_FILE_MODE)
        handle.write(payload)
    os.replace(temporary, path)


def make_private_dirs(folder: Path) -> None:
    """Create `folder` and its missing parents with mode 0o750."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for new in reversed(missing):
        new.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        os.chmod(new, PRIVATE_DIR_MODE)
