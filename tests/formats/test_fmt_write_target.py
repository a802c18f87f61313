"""Where an export lands: the file a path names, whatever kind of path it is.

An export is written to a temporary file and renamed over the target, so a reader never
sees half a file. The rename must not replace what is not a plain file: a symbolic link
(its target changes, the link stays), ``/dev/stdout`` or a named pipe (written in place).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.formats.base import write_atomic


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_a_symbolic_link_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real" / "chat.md"
    real.parent.mkdir()
    real.write_text("old\n", encoding="utf-8")
    link = tmp_path / "chat.md"
    link.symlink_to(real)

    write_atomic(link, "new text\n")

    assert link.is_symlink()
    assert real.read_text(encoding="utf-8") == "new text\n"
    assert sorted(p.name for p in real.parent.iterdir()) == ["chat.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.md", "real"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_is_written_into_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    # A reader is there first (as the reading end of `-o /dev/stdout | less` would be),
    # so opening the pipe for writing does not wait.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_atomic(fifo, '{"messages": []}\n')
        received = os.read(reader, 65536)
    finally:
        os.close(reader)

    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert received == b'{"messages": []}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_a_new_file_gets_the_permissions_of_the_umask(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "chat.md"
    write_atomic(target, "text\n")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644


def test_a_rewritten_file_keeps_its_permissions(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "chat.md"
    target.write_text("old\n", encoding="utf-8")
    os.chmod(target, 0o664)
    write_atomic(target, "new\n")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o664
    assert target.read_text(encoding="utf-8") == "new\n"


def test_a_folder_is_refused_in_one_sentence(tmp_path: Path) -> None:
    from workbench.errors import FormatError

    with pytest.raises(FormatError, match="Cannot write"):
        write_atomic(tmp_path, "text\n")
    assert list(tmp_path.iterdir()) == []
