"""Unit tests of tools/source_tree.py: a release built from a source tree (build kind tree) takes the tree's files at
the release's tag or at a HEAD of that version, and an absent vendored file from its Go module."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tools import source_tree as T

MODULES = """# github.com/a/b v1.2.3
## explicit; go 1.20
github.com/a/b
# github.com/a/b/sub v0.1.0
github.com/a/b/sub
# example.com/old v1.0.0 => example.com/new v1.1.0
example.com/old
"""


def test_module_of_a_vendored_file_is_the_longest_module_path():
    assert T.module_for("vendor/github.com/a/b/x.c", MODULES) == ("github.com/a/b", "v1.2.3", "x.c")
    assert T.module_for("vendor/github.com/a/b/sub/y.go", MODULES) == ("github.com/a/b/sub", "v0.1.0", "y.go")
    assert T.module_for("vendor/example.com/old/z.go", MODULES) == ("example.com/new", "v1.1.0", "z.go")
    assert T.module_for("vendor/github.com/other/z.go", MODULES) is None


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "src"
    (repo / "vendor/github.com/a/b").mkdir(parents=True)
    (repo / "version.go").write_text('const Version = "1.2.0"\n')
    (repo / "vendor/modules.txt").write_text(MODULES)
    (repo / "vendor/github.com/a/b/big.c").write_text("int big;\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "one")
    return repo


VERSION_FROM = {"file": "version.go", "pattern": 'const Version = "([^"]+)"'}


def test_a_head_of_the_pinned_version_is_taken_with_its_commit(repo, tmp_path):
    found = T.export(repo, "v1.2.0", VERSION_FROM, tmp_path / "out", print)
    assert found["commit"] == git(repo, "rev-parse", "HEAD") and found["ref"] == "HEAD"
    assert (tmp_path / "out/vendor/github.com/a/b/big.c").read_text() == "int big;\n"


def test_a_head_of_another_version_is_refused(repo, tmp_path):
    with pytest.raises(T.TreeError, match="has no tag v1.3.0, and its HEAD .* is version 1.2.0"):
        T.export(repo, "v1.3.0", VERSION_FROM, tmp_path / "out", print)


def test_the_release_tag_wins_over_head(repo, tmp_path):
    git(repo, "tag", "v1.2.0")
    (repo / "version.go").write_text('const Version = "1.3.0-dev"\n')
    git(repo, "commit", "-qam", "two")
    found = T.export(repo, "v1.2.0", VERSION_FROM, tmp_path / "out", print)
    assert found["ref"] == "v1.2.0" and found["commit"] == git(repo, "rev-parse", "v1.2.0")
    assert "1.2.0" in (tmp_path / "out/version.go").read_text()


def test_an_absent_vendored_file_is_taken_from_its_module_and_logged(repo, tmp_path, monkeypatch):
    blob = git(repo, "rev-parse", "HEAD:vendor/github.com/a/b/big.c")
    (repo / ".git/objects" / blob[:2] / blob[2:]).unlink()  # a snapshot without that blob
    module = tmp_path / "mod"
    module.mkdir()
    (module / "big.c").write_text("int from_module;\n")
    monkeypatch.setattr(T, "module_dir", lambda path, version: module)
    said = []
    found = T.export(repo, "v1.2.0", VERSION_FROM, tmp_path / "out", said.append)
    assert (tmp_path / "out/vendor/github.com/a/b/big.c").read_text() == "int from_module;\n"
    assert found["from_modules"] == ["vendor/github.com/a/b/big.c <- github.com/a/b@v1.2.3"]
    assert "taken from the Go module github.com/a/b@v1.2.3" in said[0]


def test_an_absent_file_outside_vendor_stops_the_build(repo, tmp_path):
    blob = git(repo, "rev-parse", "HEAD:version.go")
    (repo / ".git/objects" / blob[:2] / blob[2:]).unlink()
    with pytest.raises(T.TreeError, match="version.go is absent from the tree"):
        T.export(repo, "v1.2.0", VERSION_FROM, tmp_path / "out", print)
