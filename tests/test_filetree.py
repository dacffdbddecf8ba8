"""An image's files as facts, read from a real tar stream, and how two such trees differ."""

from __future__ import annotations

import io
import tarfile

from rocmgraph.common.filetree import Difference, compare, read_tar


def tar(*files: tuple[str, bytes, int], mtime: int = 0) -> io.BytesIO:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        folder = tarfile.TarInfo("opt")
        folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o755, mtime
        archive.addfile(folder)
        for name, data, mode in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, mtime
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("opt/current")
        link.type, link.linkname, link.mtime = tarfile.SYMTYPE, "app.py", mtime
        archive.addfile(link)
    out.seek(0)
    return out


def test_only_timestamps_may_differ() -> None:
    one = read_tar(tar(("opt/app.py", b"print(1)\n", 0o644), mtime=1))
    two = read_tar(tar(("opt/app.py", b"print(1)\n", 0o644), mtime=2_000_000_000))
    assert sorted(one) == ["/opt", "/opt/app.py", "/opt/current"]
    assert one["/opt/current"].digest == "app.py"
    assert compare(one, two) == []


def test_content_mode_and_presence_are_differences_with_a_short_diff_of_text() -> None:
    image = read_tar(tar(("opt/app.py", b"a\nb\nc\n", 0o644), ("opt/gone", b"x", 0o644)))
    rebuild = read_tar(tar(("opt/app.py", b"a\nB\nc\n", 0o755), ("opt/new", b"\0bin", 0o644)))
    assert compare(image, rebuild) == [
        Difference("/opt/app.py", "mode, content",
                   ("--- image", "+++ rebuild", "@@ -1,3 +1,3 @@", " a", "-b", "+B", " c")),
        Difference("/opt/gone", "only in the image"),
        Difference("/opt/new", "only in the rebuild"),
    ]  # fmt: skip


def test_a_dotfile_at_the_root_is_its_own_file() -> None:
    """`.profile` is /.profile: a rebuild that renamed it /profile is no identical image."""
    one = read_tar(tar((".profile", b"x\n", 0o644), ("./.dockerenv", b"", 0o644)))
    two = read_tar(tar(("profile", b"x\n", 0o644), ("./.dockerenv", b"", 0o644)))
    assert {"/.profile", "/.dockerenv"} <= set(one)
    assert [d.path for d in compare(one, two)] == ["/.profile", "/profile"]
