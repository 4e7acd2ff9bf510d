"""Atomic file output: a file is either its old content or the whole new content, never a
half-written one, when the writer is interrupted (an error, Ctrl-C, SIGTERM, a full disk).

The new content goes to a temporary file in the same folder, which is flushed to disk and then
renamed over the target (`os.replace`: atomic within one file system, on POSIX and Windows);
the folder is flushed after the rename where the system allows it (POSIX), so the rename
survives a crash of the machine too. On failure the temporary file is removed and the target is
left as it was. A target that is a symbolic link is written through (the file it points to is
replaced); the new file keeps the permissions of the file it replaces, or gets those of a
newly created file.

Inputs are opened only if they are regular files (`readable_file`): a FIFO would block the
reader forever, a device or a socket is no data file.
"""

import contextlib
import os
import pathlib
import secrets
import stat
from collections.abc import Iterator


_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a folder"))


def readable_file(path, what: str = "file") -> pathlib.Path:
    """`path` as a `pathlib.Path` if it is a regular file (or a link to one) or does not exist
    (the reader says it is missing); otherwise a one-sentence `ValueError` naming what it is,
    raised before it is opened (a FIFO would block the reader)."""
    path = pathlib.Path(path)
    try:
        mode = path.stat().st_mode
    except OSError:  # (missing, or unreadable: the reader's own message)
        return path
    for test, kind in _KINDS:
        if test(mode):
            raise ValueError(f"{path}: {kind}, not a regular file; a {what} is a file")
    return path


def _read_umask() -> int:
    # The process's file-creation mask: setting it is the only portable way to read it, so it
    # is read once, when spineid is imported.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def _flush_folder(folder: pathlib.Path) -> None:
    # Make a rename in `folder` durable (POSIX); a no-op where folders cannot be opened.
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


@contextlib.contextmanager
def atomic_path(path: str | pathlib.Path) -> Iterator[pathlib.Path]:
    """A temporary path beside `path` to write to (by any writer: matplotlib's `savefig`, a
    CSV writer); renamed over `path` when the block ends without an error, removed otherwise
    (module docstring). The temporary name ends with the suffix of `path`, so writers that
    choose a format by the suffix write the right one."""
    path = pathlib.Path(path)
    if path.is_symlink():
        path = path.resolve()
    mode = (stat.S_IMODE(path.stat().st_mode) if path.is_file()
            else 0o666 & ~_UMASK)
    # The temporary name is known before the file exists, so that an interruption at any
    # point from its creation on removes it (an interruption inside `tempfile.mkstemp`, after
    # it created the file and before its name came back, left the file behind).
    temporary = path.parent / f".{path.name}.{secrets.token_hex(6)}{path.suffix or '.part'}"
    try:
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        yield temporary
        with open(temporary, "rb+") as file:
            os.fsync(file.fileno())
        os.chmod(temporary, mode)  # mkstemp makes the file private
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _flush_folder(path.parent)


def write_text_atomically(path: str | pathlib.Path, text: str) -> pathlib.Path:
    """Write `text` (UTF-8, its line ends as they are) to `path` atomically (module
    docstring); returns the path."""
    path = pathlib.Path(path)
    with atomic_path(path) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="") as file:
            file.write(text)
    return path
