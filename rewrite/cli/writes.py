"""Every file a rewrite run writes, made whole beside its target first and put in place together at the end
(``Writes.commit``), so that an interrupted or failed run leaves the files it would change as they were: no half
written module, no partial runtime folder, no folder of a tree half filled. SIGINT and SIGTERM are held off while the
finished files are renamed into place (and while a file is made and listed), so that a signal leaves either none or
all of them there."""

from __future__ import annotations

import contextlib
import difflib
import os
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from warp_rewrite.passes.naming import RUNTIME_FOLDER

_HELD_OFF = {signal.SIGINT, signal.SIGTERM}


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _new_file_mode() -> int:
    return 0o666 & ~_umask()


@contextlib.contextmanager
def _held_off() -> Iterator[None]:
    """SIGINT and SIGTERM held off: one that arrives meanwhile is noted and handled as it would have been (its
    handler called, or its default action) once the block is done. By swapping Python's handlers, which always run
    in the main thread, rather than by a signal mask, which other threads (Warp's, numpy's) would not share."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread can change handlers; signals are handled there anyway
        return
    arrived: list[signal.Signals] = []
    previous = {
        number: signal.signal(number, lambda signum, frame: arrived.append(signal.Signals(signum)))
        for number in _HELD_OFF
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if arrived:
            first = previous[arrived[0]]
            if callable(first):
                first(arrived[0], None)
            elif first == signal.SIG_DFL:
                signal.raise_signal(arrived[0])


def _mode_of(path: Path) -> int:
    """``path``'s permissions, or a new file's usual ones."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return _new_file_mode()


def write_temporary(temporary: Path, data: bytes, mode: int) -> None:
    """``data`` written and flushed to disk in ``temporary`` (made empty by ``Writes``), with permissions ``mode``:
    what ``os.replace`` then puts in its target's place."""
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.chmod(temporary, mode)


def runtime_files() -> dict[str, bytes]:
    """The runtime package's files, name -> contents: what is copied beside emitted modules."""
    from warp_rewrite import runtime

    return {path.name: path.read_bytes() for path in sorted(Path(runtime.__file__).parent.glob("*.py"))}


def runtime_diff(directory: Path) -> Iterator[str]:
    """The unified diff that brings the runtime copy in ``directory`` up to date (new files from ``/dev/null``
    where there is none), so that ``patch -p0`` gives a tree whose emitted modules run."""
    folder = directory / RUNTIME_FOLDER
    for name, code in runtime_files().items():
        path = folder / name
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        new = code.decode("utf-8")
        if old != new:
            yield from difflib.unified_diff(
                (old or "").splitlines(keepends=True),
                new.splitlines(keepends=True),
                "/dev/null" if old is None else str(path),
                str(path),
            )


def _same_copy(folder: Path, files: dict[str, bytes]) -> bool:
    """Whether ``folder`` holds exactly the runtime's files (``files``: name -> contents), byte for byte."""
    if not folder.is_dir() or {path.name for path in folder.glob("*.py")} != set(files):
        return False
    return all((folder / name).read_bytes() == code for name, code in files.items())


@dataclass
class _Staged:
    """A finished file or folder (``made``, hidden, beside ``target``) waiting to take ``target``'s place."""

    made: Path
    target: Path


@dataclass
class Writes:
    """The writes of one run: each file and runtime copy is made beside its target as it comes (``file``, ``copy``,
    ``runtime``), and ``commit`` renames them all into place; ``discard`` (also on leaving a ``with`` block on an
    exception) removes what was made, and the folders made for them."""

    _staged: list[_Staged] = field(default_factory=list)
    _folders: list[Path] = field(default_factory=list)  # made by ``folder``, outermost first
    _runtimes: dict[Path, Path] = field(default_factory=dict)  # a folder whose runtime copy is staged -> the copy
    committed: bool = False  # everything is in place

    def __enter__(self) -> Writes:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is not None:
            self.discard()

    def folder(self, path: Path) -> None:
        """Make ``path`` and the folders above it that are missing (taken back by ``discard``)."""
        missing = []
        for folder in (path, *path.parents):
            if folder.is_dir():
                break
            missing.append(folder)
        for folder in reversed(missing):
            with _held_off():  # made and listed, or neither
                folder.mkdir()
                self._folders.append(folder)

    def _beside(self, target: Path) -> Path:
        """A new empty hidden file beside ``target``, listed to take its place."""
        with _held_off():  # made and listed, or neither: an interruption leaves nothing behind
            descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            os.close(descriptor)
            self._staged.append(_Staged(Path(temporary), target))
        return Path(temporary)

    def file(self, path: Path, data: bytes) -> None:
        """``data`` for ``path`` (through a symbolic link, the file it points to), with the permissions it has."""
        path = path.resolve() if path.is_symlink() else path
        write_temporary(self._beside(path), data, _mode_of(path))

    def copy(self, source: Path, target: Path) -> None:
        """``source`` copied to ``target`` as ``cp -r`` copies it: its bytes and permissions, a symbolic link as a
        link."""
        made = self._beside(target)
        if source.is_symlink():
            made.unlink()
            made.symlink_to(os.readlink(source))
        else:
            shutil.copyfile(source, made)
            shutil.copymode(source, made)

    def runtime(self, directory: Path) -> Path:
        """A copy of this package's runtime for the folder ``wp_rewrite_runtime/`` of ``directory``, unless the same
        is there already; once a run. Returns where it goes."""
        target = directory / RUNTIME_FOLDER
        if directory in self._runtimes:
            return target
        if target.exists() and not target.is_dir():
            raise NotADirectoryError(f"{target}: not a folder, where wp-rewrite writes its copy of the runtime")
        files = runtime_files()
        self._runtimes[directory] = target
        if _same_copy(target, files):
            return target
        with _held_off():
            fresh = Path(tempfile.mkdtemp(prefix=f".{RUNTIME_FOLDER}.", dir=directory))
            self._staged.append(_Staged(fresh, target))
        for name, code in files.items():
            (fresh / name).write_bytes(code)  # a new file's usual permissions: the folder is new and hidden
        fresh.chmod(_folder_mode())  # mkdtemp makes it private; the copy gets a new folder's usual permissions
        return target

    def commit(self) -> None:
        """Put every finished file and folder in its place, SIGINT and SIGTERM held off meanwhile (delivered after).
        A runtime copy replaces an older one whole; a single-file copy ``wp_rewrite_runtime.py`` that an earlier
        version of wp-rewrite wrote beside it goes (the folder would shadow it at import anyway)."""
        with _held_off():
            while self._staged:
                staged = self._staged[0]
                if staged.made.is_dir() and not staged.made.is_symlink():
                    _replace_folder(staged.made, staged.target)
                    single_file = staged.target.with_name(f"{RUNTIME_FOLDER}.py")
                    if single_file.is_file():
                        single_file.unlink()
                else:
                    os.replace(staged.made, staged.target)
                self._staged.pop(0)
            self._folders.clear()
            self.committed = True

    def discard(self) -> None:
        """Remove every file and folder made and not yet in place, and the folders made for them."""
        for staged in self._staged:
            if staged.made.is_dir() and not staged.made.is_symlink():
                shutil.rmtree(staged.made, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    staged.made.unlink()
        self._staged.clear()
        for folder in reversed(self._folders):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if empty: a folder something else wrote into meanwhile stays
        self._folders.clear()


def _folder_mode() -> int:
    return 0o777 & ~_umask()


def _replace_folder(fresh: Path, target: Path) -> None:
    """``fresh`` renamed to ``target``; an older ``target`` moved aside first and removed after."""
    if not target.exists():
        os.replace(fresh, target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
    os.replace(target, old / target.name)
    os.replace(fresh, target)
    shutil.rmtree(old, ignore_errors=True)
