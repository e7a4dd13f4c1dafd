"""Builds of ``kind: tree`` (versions.yml): a component that is no Go module the proxy serves (CRI-O,
cri-dockerd), built from a source tree the user points to, with the dependencies the tree vendors.

The tree is a checkout or a snapshot of the upstream repository: a git work tree, a bare git directory, or a
plain folder. From git, the files of the pinned release's tag are taken when the tree has that tag, else of
HEAD, whose own version (``version_from``) must then be the pinned one. A vendored file that the snapshot lacks
(a blob absent from it) is taken from its Go module through the module proxy, at the version
vendor/modules.txt names, and the build log says so; any other absent file stops the build. Programs are built
with ``go build -mod=vendor`` (no network), the C programs of the tree (``make``) with the host's compiler.
What the build came from (repository, commit, tree, the files taken from modules) is returned for the cache's
manifest, and `lab` evidence prints it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

TREE_ENV = "K8S_LAB_TREE_{}"  # K8S_LAB_TREE_CRIO=/path: the source tree of component crio


class TreeError(Exception):
    """A problem the user has to act on (tools/artifacts.py turns it into an ArtifactError)."""


def env_var(component: str) -> str:
    return TREE_ENV.format(re.sub(r"[^A-Z0-9]", "_", component.upper()))


def _git(tree: Path, *args: str, input_: str | None = None, check: bool = True) -> str:
    proc = subprocess.run(["git", f"--git-dir={git_dir(tree)}", *args], capture_output=True, text=True,
                          input=input_, check=False)
    if check and proc.returncode != 0:
        raise TreeError(f"git {' '.join(args)} in {tree}: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def git_dir(tree: Path) -> Path | None:
    """The git directory of ``tree`` (a work tree's .git, or the tree itself when bare), None for a plain folder."""
    if (tree / ".git").exists():
        return tree / ".git"
    if (tree / "HEAD").is_file() and (tree / "objects").is_dir():
        return tree
    return None


def _version_of(src: Path, version_from: dict) -> str | None:
    path = src / version_from["file"]
    try:
        found = re.search(version_from["pattern"], path.read_text())
    except OSError:
        return None
    return found.group(1) if found else None


def _vendored_modules(modules_txt: str) -> list[tuple[str, str, str]]:
    """(path under vendor/, module to download, its version) of each `# module version [=> target version]` line of
    vendor/modules.txt: a replaced module is vendored under its own path, with the replacement's files."""
    out = []
    for line in modules_txt.splitlines():
        words = line.split()
        if len(words) < 3 or words[0] != "#":
            continue
        if "=>" in words:
            target = words[words.index("=>") + 1:]
            if len(target) == 2 and not target[0].startswith((".", "/")):
                out.append((words[1], target[0], target[1]))
            continue
        out.append((words[1], words[1], words[2]))
    return out


def module_for(path: str, modules_txt: str) -> tuple[str, str, str] | None:
    """(module, version, path inside the module) of a file under vendor/, by the longest module path."""
    rel = path.removeprefix("vendor/")
    best, length = None, -1
    for vendored, module, version in _vendored_modules(modules_txt):
        if rel.startswith(vendored + "/") and len(vendored) > length:
            best, length = (module, version, rel[len(vendored) + 1:]), len(vendored)
    return best


def export(tree: Path, version: str, version_from: dict | None, dest: Path, log) -> dict:
    """Put the tree's files for ``version`` in ``dest``; return its provenance."""
    tree = tree.expanduser().resolve()
    if not tree.is_dir():
        raise TreeError(f"{tree} is not a folder")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if git_dir(tree) is None:
        shutil.copytree(tree, dest, dirs_exist_ok=True, symlinks=True)
        found = _version_of(dest, version_from) if version_from else None
        if found != version.lstrip("v"):
            raise TreeError(f"{tree}: a plain folder whose version ({found or 'unknown'}) is not {version}: "
                            "point to a checkout of that release")
        return {"tree": str(tree), "commit": "unknown (a folder, not a git tree)", "ref": "folder"}
    tag = _git(tree, "rev-parse", "-q", "--verify", f"refs/tags/{version}^{{commit}}", check=False).strip()
    ref = tag or _git(tree, "rev-parse", "HEAD").strip()
    listing = _git(tree, "ls-tree", "-r", "-z", ref).split("\0")
    entries = [line.split("\t", 1) for line in listing if "\t" in line]
    blobs = {meta.split()[2]: path for meta, path in entries if meta.split()[1] == "blob"}
    states = _git(tree, "cat-file", "--batch-check", input_="\n".join(blobs) + "\n").splitlines()
    absent = sorted(blobs[line.split()[0]] for line in states if line.endswith(" missing"))
    spec = ["--", "."] + [f":(exclude){p}" for p in absent]
    with tempfile.TemporaryFile() as archive:
        # (git names the absent blobs on stderr even though they are excluded)
        proc = subprocess.run(["git", f"--git-dir={git_dir(tree)}", "archive", "--format=tar", ref, *spec],
                              stdout=archive, stderr=subprocess.PIPE, check=False)
        if proc.returncode != 0:
            raise TreeError(f"git archive {ref[:12]} of {tree}: {proc.stderr.decode(errors='replace')[-500:]}")
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(dest, filter="tar")
    taken = []
    if absent:
        modules_txt = (dest / "vendor" / "modules.txt").read_text() if (dest / "vendor/modules.txt").is_file() \
            else ""
        for path in absent:
            owner = module_for(path, modules_txt) if path.startswith("vendor/") else None
            if owner is None:
                raise TreeError(f"{tree}: {path} is absent from the tree at {ref[:12]} and is no vendored file of a "
                                "Go module: use a complete checkout")
            module, mod_version, inner = owner
            source = module_dir(module, mod_version) / inner
            if not source.is_file():
                raise TreeError(f"{path}: absent from the tree, and the Go module {module}@{mod_version} has no "
                                f"{inner}")
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            taken.append(f"{path} <- {module}@{mod_version}")
            log(f"    {path} is absent from the tree: taken from the Go module {module}@{mod_version} "
                "(Go module proxy)")
    if not tag:
        found = _version_of(dest, version_from) if version_from else None
        if found != version.lstrip("v"):
            raise TreeError(f"{tree} has no tag {version}, and its HEAD ({ref[:12]}) is version "
                            f"{found or 'unknown'}: point to a checkout of {version}")
    commit = _git(tree, "rev-parse", ref).strip()
    return {"tree": str(tree), "commit": commit, "ref": version if tag else "HEAD", "from_modules": taken}


def module_dir(module: str, version: str) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, GOFLAGS="-mod=mod", GO111MODULE="on")
        proc = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd=tmp, env=env,
                              capture_output=True, text=True, check=False)
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        info = {}
    if proc.returncode != 0 or not info.get("Dir"):
        raise TreeError(f"go mod download {module}@{version}: {info.get('Error') or proc.stderr.strip()[-500:]}")
    return Path(info["Dir"])


def build(src: Path, out_dir: Path, build_spec: dict, spec: dict, version: str, arch: str, commit: str,
          run) -> dict[str, Path]:
    """Build the programs of one release file from the exported tree ``src``: archive path -> built file."""
    values = {"version": version, "bare": version.lstrip("v"), "arch": arch, "commit": commit,
              "short_commit": commit[:7]}
    ldflags = " ".join(["-s", "-w"] + [f.format(**values) for f in build_spec.get("ldflags", [])])
    env = dict(os.environ, GOOS="linux", GOARCH=arch, CGO_ENABLED="1" if build_spec.get("cgo") else "0",
               GOFLAGS="-mod=vendor", GOTOOLCHAIN="local")
    files: dict[str, Path] = {}
    for inner, package in spec.get("build_packages", {}).items():
        inner = inner.format(**values)
        out = out_dir / inner
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = ["go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", str(out)]
        if build_spec.get("tags"):
            cmd += ["-tags", ",".join(build_spec["tags"])]
        run(cmd + [package], cwd=src, env=env)
        files[inner] = out
    for folder, target in build_spec.get("make", {}).items():
        run(["make", "-C", str(src / folder), target], cwd=src, env=env)
    for inner, made in spec.get("build_made", {}).items():
        files[inner.format(**values)] = src / made
    return files
