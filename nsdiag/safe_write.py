"""Write an output file without damaging what was at its path (reports, session tables).

- Only a regular file one may write is ever replaced: a folder, device node, named pipe or
  socket at the path is refused, and so is a symbolic link (replacing the link would lose it,
  writing through it would change a file the user did not name) and a read-only file (its
  folder may be writable, but the file says keep me), for root too (no write bit in its mode).
- Atomic: the new content goes to a temporary file in the same folder, then `os.replace` puts it
  in place; a failed write removes the temporary file and leaves the old file as it was.
- A replaced file keeps its permission bits; a new file gets those the umask gives (the
  temporary file is created with 0o666, which the kernel masks with the umask).
Errors are OutputError: one line naming the path, with what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from nsdiag.errors import OutputError

# What to do about the errors writing meets, by errno (os_error_hint reads it too).
HINTS: dict[int, str] = {
    errno.EACCES: "check the permissions of the file and its folder",
    errno.EPERM: "check the permissions of the file and its folder",
    errno.EROFS: "write elsewhere",
    errno.ENOSPC: "free some space or write elsewhere",
    errno.EDQUOT: "free some space or write elsewhere",
    errno.EFBIG: "write elsewhere, to a file system that takes larger files",
    errno.ENAMETOOLONG: "use a shorter name (at most 255 bytes a name on most file systems)",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is not a folder: check the path",
    errno.EISDIR: "give a file, not a folder",
    errno.ELOOP: "too many symbolic links in the path: give the real path",
    errno.EIO: "the disk or the network file system failed: check it",
    errno.EMFILE: "raise the limit of open files (ulimit -n)",
    errno.EBADF: "nothing can be written there: open it, or redirect to a file",
}


_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def os_error_hint(error: OSError) -> str:
    """What the user can do about an OSError, in a few words."""
    return HINTS.get(error.errno or 0, "check the path and try again")


def _kind(mode: int) -> str | None:
    """The name of a file type that must not be replaced, or None for a regular file."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def _failed(path: Path, error: OSError) -> OutputError:
    return OutputError(f"cannot write {path}: {error.strerror or error}", os_error_hint(error))


def existing_mode(path: Path) -> int | None:
    """The permission bits of the regular file at `path`, None when there is none; OutputError
    when something else is there."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _failed(path, exc) from exc
    kind = _kind(info.st_mode)
    if kind == "a symbolic link":
        raise OutputError(
            f"{path} is a symbolic link; nsdiag does not replace links or write through them",
            "give the file the link points to, another name, or -o - for standard output",
        )
    if kind is not None:
        raise OutputError(
            f"{path} is {kind}, not a regular file",
            "give a file name to write, or -o - for standard output",
        )
    return stat.S_IMODE(info.st_mode)


def _parent(path: Path) -> Path:
    parent = path.parent if str(path.parent) else Path(".")
    try:
        is_dir = parent.is_dir()
    except OSError as exc:
        raise _failed(path, exc) from exc
    if not is_dir:
        exists = os.path.lexists(parent)
        raise OutputError(
            f"cannot write {path}: {parent} {'is not a folder' if exists else 'does not exist'}",
            "create the folder or choose another path",
        )
    return parent


def _writable_mode(path: Path) -> int | None:
    """existing_mode, and an OutputError for a read-only file: by its mode bits too, since for
    root os.access says yes to a 0444 file, which still says keep me."""
    mode = existing_mode(path)
    if mode is not None and (not mode & _WRITE_BITS or not os.access(path, os.W_OK)):
        raise OutputError(
            f"{path} is read-only", "make it writable (chmod u+w) or choose another name"
        )
    return mode


def check_target(path: Path) -> None:
    """OutputError now, before any work, when `path` cannot be written safely."""
    _writable_mode(path)
    _parent(path)


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary file to write the new content into (by name); on a clean exit it replaces
    `path` atomically, on an error it is removed and `path` is left as it was."""
    mode = _writable_mode(path)
    parent = _parent(path)
    temporary = parent / f".{path.name[:200]}.{secrets.token_hex(4)}.tmp"
    try:
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as exc:
        raise _failed(path, exc) from exc
    try:
        yield temporary
        if mode is not None:
            os.chmod(temporary, mode)
        existing_mode(path)  # still nothing, or a regular file (not a link put there since)
        os.replace(temporary, path)
    except OSError as exc:
        raise _failed(path, exc) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def write_atomically(path: Path, data: bytes) -> Path:
    """Write `data` to `path` safely (the rules above)."""
    with replacing(path) as temporary, open(temporary, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    return path
