"""Fill the artifact cache with every pinned component the cluster needs, and
say what the nodes need from it (the artifact plan).

The cache mirrors the upstream download sites (``<cache>/<host>/<path>``) so
that a plain HTTP server over it is a drop-in mirror, and keeps a checksum
manifest (``manifest.json``) of every file it holds. Where files come from is
one vocabulary, shared with settings.yml's ``artifacts.source`` (README,
"Offline artifacts"):

* ``cache``: only what the cache holds, verified; nothing is fetched;
* ``mirror``: another machine's cache served over HTTP (``K8S_LAB_MIRROR``,
  else settings.yml ``artifacts.mirror``), verified against its manifest;
* ``upstream``: the official release URL, verified against the sha256 pinned
  in versions.yml or the release's own ``.sha256``, with retries;
* ``build`` (host only): the upstream Go module, built with the local Go
  toolchain, with the pinned version stamped into the binary;
* ``auto`` (the default): the cache where it holds a file intact, else the
  mirror when one is set and holds it, else upstream when the host resolves,
  else a build when Go is available, else one clear error.

Images are always assembled locally (or taken from a mirror). Files that fail
verification are fetched or built again.

Usage: python3 -m tools.artifacts [--source auto|cache|mirror|upstream|build] [--mirror URL]
                                  [--cache DIR] [--arch amd64|arm64] [--only ID ...] [--list]
       python3 -m tools.artifacts plan [--source auto|cache|mirror|upstream] [--mirror URL]
                                  [--cache DIR] [--arch amd64|arm64 ...] [--output FILE]

``plan`` prints the artifact plan of the nodes as JSON (node_plan): what the
inventory publishes as ``lab_artifacts`` for the artifacts role.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import io
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tools import source_tree
from tools.arch import ARCHES, SUPPORTED, lab_arch
from tools.locations import default_cache

ROOT = Path(__file__).resolve().parent.parent
VERSIONS_FILE = ROOT / "versions.yml"
MANIFEST = "manifest.json"
# Where artifacts come from: one vocabulary for the host (this tool, `make artifacts SOURCE=`) and the nodes
# (settings.yml artifacts.source, the artifacts role); the nodes cannot build.
SOURCES = ("auto", "cache", "mirror", "upstream", "build")
NODE_SOURCES = ("auto", "cache", "mirror", "upstream")
OLD_SOURCES = {"download": "upstream"}  # the spelling before issue 9
# Which nodes need a file or image (versions.yml `nodes`); "none": only the host (an image's build input).
NODE_GROUPS = ("all", "control_plane", "none")


class ArtifactError(Exception):
    """A problem the user has to act on; printed without a traceback."""


LOCK = ".fill.lock"
LOCK_WAIT = 3 * 3600  # s: a cold fill builds every component from its Go module (an hour and more on 2 cores)


@contextlib.contextmanager
def fill_lock(cache: Path, *, wait: float = LOCK_WAIT, poll: float = 5.0, log=print):
    """One fill of a cache at a time: two (two terminals, a test run beside `make artifacts`) would build into the
    same work directories and record the same manifest. The second waits, boundedly, for the first to finish."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / LOCK, "a+") as handle:
        deadline = time.monotonic() + wait
        told = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                if time.monotonic() >= deadline:
                    raise ArtifactError(f"the cache {cache} is being filled by {holder} and was not released "
                                        f"within {wait:.0f}s; wait for it, or stop it and run `make artifacts` "
                                        "again") from None
                if not told:
                    log(f"artifacts: waiting for {holder}, which is filling {cache}")
                    told = True
                time.sleep(poll)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)


def host_arch() -> str:
    arch = lab_arch()
    if arch is None:
        raise ArtifactError(f"unsupported architecture {platform.machine()!r}: the lab supports "
                            f"{' and '.join(SUPPORTED)}")
    return arch


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def expand(template: str, version: str, arch: str) -> str:
    return template.format(version=version, bare=version.lstrip("v"), arch=arch)


# --------------------------------------------------------------------------
# What the cache must hold


@dataclass
class Artifact:
    """One file of the cache: a release file or an image archive."""

    id: str
    component: str
    version: str
    arch: str
    url: str  # upstream URL (images: a pseudo URL naming the image)
    relpath: str  # path inside the cache (host/path of the URL)
    official_sha256: str | None
    kind: str  # "file" or "image"
    sha256_url: str | None = None
    spec: dict = field(default_factory=dict)
    build: dict = field(default_factory=dict)

    @property
    def downloadable(self) -> bool:
        return bool(self.official_sha256 or self.sha256_url)

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.url).hostname or ""


def load_versions(path: Path = VERSIONS_FILE) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ArtifactError(f"cannot read the versions file {path}: {exc}") from exc
    if not isinstance(data, dict) or "components" not in data:
        raise ArtifactError(f"{path}: expected a 'components' mapping")
    return data


def relpath_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.hostname}{parts.path}"


def image_relpath(name: str, version: str, arch: str) -> str:
    return f"images/{name}/{version}/image-linux-{arch}.tar"


def plan(versions: dict, arch: str, sets: tuple[str, ...] | list[str] = ()) -> list[Artifact]:
    """Every artifact the cluster needs on ``arch``, in build order; with ``sets``, also the opt-in artifacts of
    those sets (versions.yml ``set``: conformance, the upstream test suite and its images)."""
    items: list[Artifact] = []
    for comp_name, comp in versions["components"].items():
        version = comp["version"]
        for file_id, spec in comp["files"].items():
            if spec.get("set") and spec["set"] not in sets:
                continue
            url = expand(spec["url"], version, arch)
            items.append(
                Artifact(
                    id=file_id,
                    component=comp_name,
                    version=version,
                    arch=arch,
                    url=url,
                    relpath=relpath_of(url),
                    official_sha256=(spec.get("sha256") or {}).get(arch),
                    kind="file",
                    sha256_url=(spec["sha256_url"].format(url=url, version=version, bare=version.lstrip("v"),
                                                          arch=arch) if spec.get("sha256_url") else None),
                    spec=spec,
                    build=comp.get("build", {}),
                )
            )
    for image_id, spec in versions.get("images", {}).items():
        if spec.get("set") and spec["set"] not in sets:
            continue
        name, version = spec["name"], str(spec["version"])
        items.append(
            Artifact(
                id=f"image/{image_id}",
                component=image_id,
                version=version,
                arch=arch,
                url=f"oci://{name}:{version}",
                relpath=image_relpath(name, version, arch),
                official_sha256=None,
                kind="image",
                spec=spec,
            )
        )
    return items


def canonical_source(source: str, allowed: tuple[str, ...] = SOURCES) -> str:
    """``source`` in the shared vocabulary (the old ``download`` still means ``upstream``)."""
    source = OLD_SOURCES.get(source, source)
    if source not in allowed:
        hint = " (the nodes cannot build: build into the cache with `make artifacts SOURCE=build`)" \
            if source == "build" else ""
        raise ArtifactError(f"unknown source {source!r}: use one of {', '.join(allowed)}{hint}")
    return source


def check_mirror(source: str, mirror: str | None) -> str:
    """The mirror's base URL without a trailing slash ('' for none); source ``mirror`` needs one."""
    mirror = (mirror or "").rstrip("/")
    parts = urllib.parse.urlsplit(mirror)
    if mirror and not (parts.scheme in ("http", "https") and parts.netloc):
        raise ArtifactError(f"the mirror {mirror!r} is not an http(s) URL")
    if source == "mirror" and not mirror:
        raise ArtifactError("source mirror needs a mirror: set K8S_LAB_MIRROR (or artifacts.mirror in settings.yml)")
    return mirror


def node_plan(versions: dict, arches: list[str] | tuple[str, ...], source: str = "auto", mirror: str | None = "",
              cache: str | Path | None = None, needed_sets: tuple[str, ...] | list[str] = ()) -> dict:
    """The artifact plan of the nodes: the one description of what the artifacts role verifies, fetches and
    exposes, JSON-serialisable (the inventory publishes it as ``lab_artifacts``).

    Per architecture: each release file and image some node needs (versions.yml ``nodes``: ``all`` or
    ``control_plane``) with its id, component, version, upstream URL, path in the cache (``relpath``), official
    sha256 or the URL of the release's own ``.sha256``, the binaries it holds and where each is on the controller
    once unpacked; and ``paths``, binary (images: ``image/<id>``) -> path, what the role exposes as
    ``artifacts_files``. Plus where the files come from (``source``, ``mirror``) and the cache's location.
    ``needed_sets``: opt-in sets some node needs (runtimes: CRI-O or Docker Engine workers), whose files are
    verified and exposed like the others; the other sets are only described (``sets``).
    """
    source = canonical_source(source, NODE_SOURCES)
    mirror = check_mirror(source, mirror)
    cache_dir = Path(cache or default_cache()).expanduser().absolute()
    # arch_names: the machine names a node may report (Ansible's ansible_facts.architecture) -> the plan's arches.
    result: dict = {"source": source, "mirror": mirror, "cache_dir": str(cache_dir), "arch_names": dict(ARCHES),
                    "arches": {}}
    for arch in arches:
        if arch not in SUPPORTED:
            raise ArtifactError(f"unsupported architecture {arch!r}: use amd64 or arm64")
        described: dict[str, dict] = {}  # "" (what the cluster needs), or an opt-in set -> files, images, paths
        for art in plan(versions, arch, optional_sets(versions)):
            nodes = art.spec.get("nodes")
            if nodes not in NODE_GROUPS:
                where = (f"images.{art.component}" if art.kind == "image"
                         else f"components.{art.component}.files.{art.id}")
                raise ArtifactError(f"versions.yml: {where}.nodes: {nodes!r}: use one of {', '.join(NODE_GROUPS)}")
            if nodes == "none":
                continue
            group = "" if art.spec.get("set") in needed_sets else art.spec.get("set", "")
            files, images, paths = (described.setdefault(group, {
                "files": [], "images": [], "paths": {}})[k] for k in ("files", "images", "paths"))
            if art.kind == "image":
                path = str(cache_dir / art.relpath)
                images.append({"id": art.id, "component": art.component, "version": art.version, "nodes": nodes,
                               "ref": f"{art.spec['name']}:{art.version}", "relpath": art.relpath, "path": path})
                paths[art.id] = path
                continue
            archive = art.relpath.endswith((".tar.gz", ".tgz"))
            binaries = {}
            for member, name in art.spec["binaries"].items():
                member = expand(member, art.version, arch)
                inside = f".extracted/{art.relpath}/{member.removeprefix('./')}" if archive else art.relpath
                if name in paths:
                    raise ArtifactError(f"versions.yml: binary {name!r} is in two files (the second: {art.id})")
                binaries[name] = {"member": member, "path": str(cache_dir / inside)}
                paths[name] = binaries[name]["path"]
            files.append({"id": art.id, "component": art.component, "version": art.version, "nodes": nodes,
                          "url": art.url, "relpath": art.relpath, "archive": archive,
                          "sha256": art.official_sha256, "sha256_url": art.sha256_url, "binaries": binaries})
        result["arches"][arch] = {**described.pop("", {"files": [], "images": [], "paths": {}}), "sets": described}
    return result


def cached_file(file_id: str, arch: str | None = None, sets: tuple[str, ...] = (), cache: Path | None = None) -> Path:
    """Where the cache keeps a release file of versions.yml (by id), for ``arch`` (default: this host's)."""
    items = {a.id: a for a in plan(load_versions(), arch or host_arch(), sets) if a.kind == "file"}
    if file_id not in items:
        raise ArtifactError(f"no release file {file_id!r} in versions.yml ({', '.join(sorted(items))})")
    return (cache or default_cache()) / items[file_id].relpath


def optional_sets(versions: dict) -> tuple[str, ...]:
    """The opt-in sets versions.yml names (``set:`` of a file or an image), which `make artifacts` leaves out."""
    specs = [f for c in versions["components"].values() for f in c["files"].values()]
    specs += list(versions.get("images", {}).values())
    return tuple(sorted({s["set"] for s in specs if s.get("set")}))


# --------------------------------------------------------------------------
# The manifest


class Manifest:
    """``manifest.json``: relpath -> sha256, size, mtime, source, component, version.

    ``size`` and ``mtime`` are the file's when its sha256 was last computed: the artifacts role re-hashes only
    the files whose size or modification time differ (the quick check of make and rsync), instead of every
    file on every run."""

    def __init__(self, cache: Path):
        self.cache = cache
        self.path = cache / MANIFEST
        self.entries: dict[str, dict] = {}
        if self.path.exists():
            try:
                self.entries = json.loads(self.path.read_text()).get("files", {})
            except (ValueError, AttributeError):
                self.entries = {}  # a damaged manifest only costs a re-verify

    def record(self, art: Artifact, source: str, provenance: dict | None = None) -> None:
        """``provenance``: what a build from a source tree came from (repository, commit, tree)."""
        target = self.cache / art.relpath
        self.entries[art.relpath] = {
            **({"built_from": provenance} if provenance else {}),
            "sha256": sha256_file(target),
            "size": target.stat().st_size,
            "mtime": target.stat().st_mtime,
            "source": source,
            "component": art.component,
            "version": art.version,
            "arch": art.arch,
            "url": art.url,
        }
        self.save()

    def forget(self, relpath: str) -> None:
        if self.entries.pop(relpath, None) is not None:
            self.save()

    def save(self) -> None:
        self.cache.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"files": dict(sorted(self.entries.items()))}, indent=2) + "\n")
        tmp.replace(self.path)
        sums = "".join(f"{e['sha256']}  {p}\n" for p, e in sorted(self.entries.items()))
        (self.cache / "SHA256SUMS").write_text(sums)

    def verify(self, art: Artifact) -> str | None:
        """None when the cached file is intact, else the reason it is not."""
        entry = self.entries.get(art.relpath)
        target = self.cache / art.relpath
        if entry is None:
            return "not in the manifest"
        if entry.get("version") != art.version:
            return f"manifest has version {entry.get('version')}, want {art.version}"
        if not target.is_file():
            return "file missing"
        if target.stat().st_size != entry["size"]:
            return f"size {target.stat().st_size} != {entry['size']} (truncated?)"
        actual = sha256_file(target)
        if actual != entry["sha256"]:
            return f"sha256 {actual} != manifest {entry['sha256']} (corrupted?)"
        if entry.get("source") == "download" and art.official_sha256 and actual != art.official_sha256:
            return "downloaded file does not match the official sha256"
        if entry.get("mtime") != target.stat().st_mtime:  # same content, touched (or an older manifest)
            entry["mtime"] = target.stat().st_mtime
            self.save()
        return None


# --------------------------------------------------------------------------
# Choosing a source


def resolves(host: str) -> bool:
    """Whether ``host`` resolves: the only network probe the tool makes."""
    try:
        socket.getaddrinfo(host, 443)
    except (OSError, UnicodeError):
        return False
    return True


def go_available() -> bool:
    return shutil.which("go") is not None


def choose_source(art: Artifact, requested: str, *, resolver=resolves, has_go=go_available,
                  trees: dict | None = None) -> str:
    """How to obtain a file that neither the cache nor a mirror supplies: ``download`` (from upstream) or
    ``build``, the two ways a file gets into a cache (what manifest.json records as its ``source``).
    ``trees``: component -> source tree, for the components built from one (build kind ``tree``)."""
    requested = canonical_source(requested)
    if art.build.get("kind") == "tree" and requested != "upstream" and (requested == "build" or not (
            art.downloadable and resolver(art.host))):
        if (trees or {}).get(art.component) and has_go():
            return "build"
        why = (f"{art.host} does not resolve" if art.downloadable and requested != "build"
               else "it is to be built" if requested == "build"
               else f"its publisher gives no checksum for {art.id} {art.version}")
        raise ArtifactError(
            f"cannot obtain {art.id} {art.version} ({art.arch}): {why}, and it is built only from a source tree "
            f"you point to: a checkout or snapshot of {art.build.get('repository', art.component)} at {art.version} "
            f"(`make artifacts-runtimes {art.component.upper()}_TREE=/path`, or `python3 -m tools.artifacts --with "
            f"{art.spec.get('set', 'runtimes')} --tree {art.component}=/path`, or {source_tree.env_var(art.component)}"
            "), with Go on PATH (`make deps`); or copy a cache that holds it, or set K8S_LAB_MIRROR")
    if requested in ("cache", "mirror"):
        raise ArtifactError(f"cannot obtain {art.id} {art.version} ({art.arch}) with source {requested}")
    if art.kind == "image":
        return "build"  # images are always assembled locally
    if requested == "upstream":
        return "download"
    if requested == "build":
        return "build"
    if art.downloadable and resolver(art.host):
        return "download"
    if has_go():
        return "build"
    why = (
        f"{art.host} does not resolve"
        if art.downloadable
        else f"versions.yml has no official sha256 for {art.id} on {art.arch}"
    )
    raise ArtifactError(
        f"cannot obtain {art.id} {art.version} ({art.arch}): {why} and Go is not installed. "
        "Either run `make deps` (installs Go's build dependencies) and re-run `make artifacts` with "
        "Go on PATH, or copy a filled cache from another machine into "
        f"{default_cache()} (or point K8S_LAB_CACHE at it), or serve one over HTTP and set "
        "K8S_LAB_MIRROR."
    )


# --------------------------------------------------------------------------
# Download


def fetch(url: str, dest: Path, *, timeout: float) -> None:
    with urllib.request.urlopen(url, timeout=timeout) as resp, dest.open("wb") as out:  # noqa: S310
        shutil.copyfileobj(resp, out, 1 << 20)


def expected_sha256(art: Artifact, *, timeout: float = 30.0, opener=None) -> str:
    """The official checksum: pinned in versions.yml, else the published .sha256 file."""
    if art.official_sha256:
        return art.official_sha256
    if not art.sha256_url:
        raise ArtifactError(f"refusing to download {art.url}: no official sha256 for {art.arch}")
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "sha256"
        (opener or fetch)(art.sha256_url, target, timeout=timeout)
        found = checksum_in(target.read_text(), art.url.rsplit("/", 1)[-1])
    if found is None:
        raise ArtifactError(f"{art.sha256_url} holds no sha256 for {art.url.rsplit('/', 1)[-1]}")
    return found


def checksum_in(text: str, filename: str) -> str | None:
    """The sha256 a checksum file gives for ``filename``: a file of one hash (KEY.sha256), or the lines
    `HASH  NAME` of a release's checksums.txt (as sha256sum writes them, `*NAME` in binary mode)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if len(lines) == 1 and len(lines[0]) == 1:
        candidates = [lines[0][0]]
    else:
        candidates = [words[0] for words in lines if len(words) >= 2 and words[-1].lstrip("*") == filename]
    return candidates[0].lower() if candidates and len(candidates[0]) == 64 else None


def download(art: Artifact, dest: Path, *, expected: str | None = None, url: str | None = None,
             retries: int = 4, timeout: float = 60.0, opener=None, pause=time.sleep) -> None:
    """Fetch ``art`` into ``dest``; reject it unless its sha256 is ``expected``
    (by default the official one). Network errors are retried, a wrong checksum is not."""
    url = url or art.url
    opener = opener or fetch
    last: Exception | None = None
    for attempt in range(1, retries + 1):
        tmp = dest.with_name(dest.name + ".part")
        try:
            want = expected or expected_sha256(art, timeout=timeout, opener=opener)
            dest.parent.mkdir(parents=True, exist_ok=True)
            opener(url, tmp, timeout=timeout)
            actual = sha256_file(tmp)
            if actual != want:
                tmp.unlink()
                raise ArtifactError(f"checksum mismatch for {url}: got {actual}, expected {want}")
            tmp.replace(dest)
            return
        except ArtifactError:
            raise
        except (OSError, urllib.error.URLError) as exc:
            last = exc
            tmp.unlink(missing_ok=True)
            if attempt < retries:
                pause(min(2**attempt, 10))
    raise ArtifactError(f"download of {url} failed after {retries} attempts: {last}")


def mirror_manifest(mirror: str, *, opener=None) -> dict:
    """The manifest of a mirror (another machine's cache served over HTTP)."""
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / MANIFEST
        try:
            (opener or fetch)(f"{mirror.rstrip('/')}/{MANIFEST}", target, timeout=30.0)
            return json.loads(target.read_text()).get("files", {})
        except (OSError, ValueError, urllib.error.URLError) as exc:
            raise ArtifactError(f"cannot read {MANIFEST} from the mirror {mirror}: {exc}") from exc


# --------------------------------------------------------------------------
# Build from the upstream Go modules


def run(cmd: list[str], *, cwd: Path | None = None, env: dict | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ArtifactError(
            f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
        )
    return proc.stdout


def go_env(arch: str, cgo: bool) -> dict:
    env = dict(os.environ)
    env.update(GOOS="linux", GOARCH=arch, CGO_ENABLED="1" if cgo else "0", GOFLAGS="-mod=mod")
    return env


def staging_replaces(module_dir: Path, version: str) -> list[str]:
    """Each ``k8s.io/X => ./staging/...`` of the release becomes ``k8s.io/X vA.B.C``.

    Staging modules are published as v0.<minor>.<patch> for release v1.<minor>.<patch>.
    """
    published = "v0." + version.lstrip("v").split(".", 1)[1]
    result = []
    for line in (module_dir / "go.mod").read_text().splitlines():
        line = line.strip()
        if "=> ./staging/" in line:
            result.append(f"{line.split()[0]}={line.split()[0]}@{published}")
    return result


def wrapper_module(workdir: Path, name: str, requires: list[str], replaces: list[str], arch: str) -> None:
    """A throw-away module that requires the release (and pins replaced modules)."""
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in ("go.mod", "go.sum"):
        (workdir / stale).unlink(missing_ok=True)
    env = go_env(arch, cgo=False)
    run(["go", "mod", "init", f"k8s-arch-lab.local/build/{name}"], cwd=workdir, env=env)
    for rep in replaces:
        run(["go", "mod", "edit", "-replace", rep], cwd=workdir, env=env)
    for req in requires:
        run(["go", "mod", "edit", "-require", req], cwd=workdir, env=env)


def module_dir(module: str, version: str, workdir: Path, arch: str) -> Path:
    out = run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd=workdir, env=go_env(arch, False))
    return Path(json.loads(out)["Dir"])


def kubernetes_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return " ".join(flags)


def go_build(package: str, out: Path, workdir: Path, arch: str, build: dict, version: str,
             test: bool = False) -> None:
    """``go build`` of a package into ``out`` (``go test -c``, its test binary, with ``test``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    cgo = bool(build.get("cgo"))
    if build.get("kind") == "kubernetes":
        ldflags = kubernetes_ldflags(version)
    else:
        ldflags = " ".join(["-s", "-w"] + [expand(f, version, arch) for f in build.get("ldflags", [])])
    if build.get("static"):
        ldflags += " -extldflags -static"
    cmd = ["go", "test", "-c"] if test else ["go", "build"]
    cmd += ["-trimpath", "-ldflags", ldflags, "-o", str(out)]
    if build.get("tags"):
        cmd += ["-tags", ",".join(build["tags"])]
    run(cmd + [package], cwd=workdir, env=go_env(arch, cgo))


def build_workdir(cache: Path, art: Artifact) -> Path:
    return cache / ".build" / f"{art.component}-{art.version}-{art.arch}"


def prepare_module(cache: Path, art: Artifact) -> Path:
    workdir = build_workdir(cache, art)
    if (workdir / ".ready").exists():
        return workdir
    kind = art.build.get("kind")
    if kind == "kubernetes":
        workdir.mkdir(parents=True, exist_ok=True)
        src = module_dir(art.build["module"], art.version, workdir, art.arch)
        replaces = staging_replaces(src, art.version)
        wrapper_module(workdir, art.component, [f"{art.build['module']}@{art.version}"], replaces, art.arch)
    elif kind == "gomodule":
        wrapper_module(workdir, art.component, [f"{m}@{art.version}" for m in art.build["modules"]], [], art.arch)
    else:
        raise ArtifactError(f"{art.component}: unknown build kind {kind!r}")
    (workdir / ".ready").touch()
    return workdir


def add_file(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    info.uname = info.gname = "root"
    tar.addfile(info, io.BytesIO(data))


def write_tar(dest: Path, files: dict[str, Path], gzip: bool, modes: dict[str, int] | None = None) -> None:
    """A reproducible archive of ``files`` (archive path -> local file; executables unless ``modes`` says)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in sorted(files):
            add_file(tar, name, files[name].read_bytes(), (modes or {}).get(name, 0o755))
    data = raw.getvalue()
    if gzip:
        import gzip as gz

        data = gz.compress(data, mtime=0)
    tmp.write_bytes(data)
    tmp.replace(dest)


def build_from_tree(cache: Path, art: Artifact, tree: Path, log=print) -> dict:
    """A release file built from a source tree (build kind ``tree``, tools/source_tree.py); its provenance."""
    workdir = build_workdir(cache, art)
    try:
        provenance = source_tree.export(tree, art.version, art.build.get("version_from"), workdir / "src", log)
        log(f"    built from {provenance['tree']} at {provenance['ref']} ({provenance['commit'][:12]})")
        files = source_tree.build(workdir / "src", workdir / "out", art.build, art.spec, art.version, art.arch,
                                  provenance["commit"], run)
    except source_tree.TreeError as exc:
        raise ArtifactError(f"{art.id}: {exc}") from exc
    dest = cache / art.relpath
    write_tar(dest, files, gzip=dest.name.endswith((".tar.gz", ".tgz")))
    shutil.rmtree(workdir / "src", ignore_errors=True)
    return {"repository": art.build.get("repository"), **provenance}


def build_file(cache: Path, art: Artifact) -> None:
    workdir = prepare_module(cache, art)
    dest = cache / art.relpath
    if "build_package" in art.spec:
        out = workdir / "out" / dest.name
        go_build(art.spec["build_package"], out, workdir, art.arch, art.build, art.version)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, dest)
        dest.chmod(0o755)
        return
    files: dict[str, Path] = {}
    # build_tests: a package's tests as one binary (`go test -c`: e2e.test).
    programs = [(inner, package, False) for inner, package in art.spec.get("build_packages", {}).items()]
    programs += [(inner, package, True) for inner, package in art.spec.get("build_tests", {}).items()]
    for inner, package, test in programs:
        inner = expand(inner, art.version, art.arch)
        out = workdir / "out" / inner.lstrip("./")
        go_build(package, out, workdir, art.arch, art.build, art.version, test=test)
        files[inner] = out
    modes: dict[str, int] = {}
    if art.spec.get("build_trees"):
        # Folders of the module itself (data the binary reads, e.g. kube-bench's cfg/), as the release ships them.
        src = module_dir(art.build["modules"][0], art.version, workdir, art.arch)
        for inner, folder in art.spec["build_trees"].items():
            for path in sorted(p for p in (src / folder).rglob("*") if p.is_file()):
                name = f"{inner}/{path.relative_to(src / folder)}"
                files[name], modes[name] = path, 0o644
    write_tar(dest, files, gzip=dest.name.endswith((".tar.gz", ".tgz")), modes=modes)


# --------------------------------------------------------------------------
# Images


def oci_archive(dest: Path, name: str, tag: str, arch: str, layer_files: dict[str, tuple[bytes, int]],
                config: dict, symlinks: dict[str, str] | None = None, base: Path | None = None) -> None:
    """Write an OCI image layout archive that both ``ctr images import`` and
    ``docker load`` accept, naming the image ``name:tag``: one layer of
    ``layer_files`` and ``symlinks``, on top of ``base`` (a layer tar) if given."""
    layer_raw = io.BytesIO()
    with tarfile.open(fileobj=layer_raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        dirs = sorted({str(Path(p).parent) for p in list(layer_files) + list(symlinks or {})} - {"."})
        for d in dirs:
            parts = Path(d).parts
            for i in range(1, len(parts) + 1):
                sub = "/".join(parts[:i])
                if sub not in tar.getnames():
                    info = tarfile.TarInfo(sub)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
                    tar.addfile(info)
        for path in sorted(layer_files):
            data, mode = layer_files[path]
            add_file(tar, path, data, mode)
        for path, target in sorted((symlinks or {}).items()):
            info = tarfile.TarInfo(path)
            info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, target, 0o777, 0
            tar.addfile(info)
    layers = [layer_raw.getvalue()]
    diff_ids = [hashlib.sha256(layers[0]).hexdigest()]
    media = ["application/vnd.oci.image.layer.v1.tar"]
    if base:  # large: kept gzipped (the runtime unpacks it; its diff id is the tar's own digest)
        packed, diff_id = gzipped(base)
        diff_ids.insert(0, diff_id)
        layers.insert(0, packed)
        media.insert(0, "application/vnd.oci.image.layer.v1.tar+gzip")
    digests = [hashlib.sha256(layer).hexdigest() for layer in layers]
    cfg = {
        "architecture": arch,
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]},
        "history": [{"created_by": "k8s-arch-lab tools/artifacts.py"} for _ in digests],
    }
    cfg_bytes = json.dumps(cfg, sort_keys=True).encode()
    cfg_digest = hashlib.sha256(cfg_bytes).hexdigest()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": f"sha256:{cfg_digest}", "size": len(cfg_bytes)},
        "layers": [{"mediaType": m, "digest": f"sha256:{d}", "size": len(layer)}
                   for m, d, layer in zip(media, digests, layers, strict=True)],
    }
    man_bytes = json.dumps(manifest, sort_keys=True).encode()
    man_digest = hashlib.sha256(man_bytes).hexdigest()
    ref = f"{name}:{tag}"
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": f"sha256:{man_digest}", "size": len(man_bytes),
            "platform": {"architecture": arch, "os": "linux"},
            "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag},
        }],
    }
    docker_manifest = [{"Config": f"blobs/sha256/{cfg_digest}", "RepoTags": [ref],
                        "Layers": [f"blobs/sha256/{d}" for d in digests]}]
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    with tarfile.open(tmp, mode="w", format=tarfile.GNU_FORMAT) as tar:
        add_file(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}', 0o644)
        add_file(tar, "index.json", json.dumps(index, sort_keys=True).encode(), 0o644)
        add_file(tar, "manifest.json", json.dumps(docker_manifest).encode(), 0o644)
        for digest, blob in (*zip(digests, layers, strict=True), (cfg_digest, cfg_bytes), (man_digest, man_bytes)):
            add_file(tar, f"blobs/sha256/{digest}", blob, 0o644)
    tmp.replace(dest)


def gzipped(layer: Path) -> tuple[bytes, str]:
    """A layer tar gzipped, and the tar's sha256 (its diff id): both made once, kept beside it (``.gz``,
    ``.sha256``) for the next image on the same base."""
    import gzip

    packed, digest = layer.with_name(layer.name + ".gz"), layer.with_name(layer.name + ".sha256")
    if not packed.exists() or not digest.exists() or packed.stat().st_mtime < layer.stat().st_mtime:
        part = packed.with_name(packed.name + ".part")
        tar_sha = hashlib.sha256()
        with layer.open("rb") as src, gzip.GzipFile(part, "wb", compresslevel=6, mtime=0) as dst:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                tar_sha.update(chunk)
                dst.write(chunk)
        digest.write_text(tar_sha.hexdigest())
        part.replace(packed)
    return packed.read_bytes(), digest.read_text().strip()


def extract_member(archive: Path, member: str) -> bytes:
    with tarfile.open(archive) as tar:
        for info in tar.getmembers():
            if info.name.lstrip("./") == member.lstrip("./"):
                handle = tar.extractfile(info)
                if handle is not None:
                    return handle.read()
    raise ArtifactError(f"{archive} has no member {member}")


BUSYBOX_APPLETS = ("sh", "ls", "cat", "echo", "env", "hostname", "ip", "ps", "sleep", "wget", "nc",
                   "nslookup", "kill", "grep", "id", "mkdir", "rm", "date", "uname", "top", "true", "false")


def build_image(cache: Path, art: Artifact, versions: dict, all_items: list[Artifact]) -> None:
    source = art.spec["from"]
    dest = cache / art.relpath
    name, tag = art.spec["name"], art.version
    workdir = cache / ".build" / f"image-{art.component}-{art.version}-{art.arch}"
    workdir.mkdir(parents=True, exist_ok=True)
    if source["kind"] == "pause":
        comp = versions["components"][source["component"]]
        cc = os.environ.get("CC", "cc")
        if not shutil.which(cc):
            raise ArtifactError("building the pause image needs a C compiler (run `make deps`)")
        src = module_dir(comp["build"]["module"], comp["version"], workdir, art.arch) / "build/pause/linux/pause.c"
        out = workdir / "pause"
        run([cc, "-Os", "-Wall", "-Werror", "-static", f"-DVERSION=v{tag}-k8s-arch-lab", "-o", str(out), str(src)])
        oci_archive(dest, name, tag, art.arch, {"pause": (out.read_bytes(), 0o755)},
                    {"Entrypoint": ["/pause"], "User": "65535:65535"})
    elif source["kind"] == "binary" and "path" in source:  # a release file's binary at a path of the image
        owner = next(i for i in all_items if i.component == source["component"] and i.id == source["file"])
        data = extract_member(cache / owner.relpath, expand(source["binary"], owner.version, art.arch))
        oci_archive(dest, name, tag, art.arch, {**MINIMAL_ROOT, source["path"]: (data, 0o755)},
                    {"Cmd": ["/" + source["path"]], "Env": [f"PATH={E2E_PATH}"]})
    elif source["kind"] == "binary":
        owner = next(i for i in all_items if i.component == source["component"] and i.id == source["file"])
        data = extract_member(cache / owner.relpath, source["binary"])
        oci_archive(dest, name, tag, art.arch, {"coredns": (data, 0o755)},
                    {"Entrypoint": ["/coredns"], "User": "65532:65532", "ExposedPorts": {"53/tcp": {}, "53/udp": {}}})
    elif source["kind"] == "program":  # a program of the pinned Kubernetes module (nonewprivs' nnp, setuid root)
        comp = versions["components"][source["component"]]
        module = prepare_module(cache, next(i for i in all_items if i.component == source["component"]))
        out = workdir / source["path"].rsplit("/", 1)[1]
        go_build(f"{comp['build']['module']}/{source['package']}", out, module, art.arch, {}, comp["version"])
        oci_archive(dest, name, tag, art.arch, {**MINIMAL_ROOT,
                                                source["path"]: (out.read_bytes(), int(str(source["mode"]), 8))},
                    {"Cmd": source["cmd"], "Env": [f"PATH={E2E_PATH}"]})
    elif source["kind"] == "gomodule":  # a program of a Go module of its own (the sample API server)
        module = workdir / "module"
        if not (module / ".ready").exists():
            wrapper_module(module, art.component, [f"{source['module']}@{source['version']}"], [], art.arch)
            (module / ".ready").touch()
        out = workdir / source["binary"]
        go_build(source["package"], out, module, art.arch, {}, source["version"])
        oci_archive(dest, name, tag, art.arch, {**MINIMAL_ROOT, source["binary"]: (out.read_bytes(), 0o755)},
                    {"Entrypoint": ["/" + source["binary"]], "Env": [f"PATH={E2E_PATH}"]})
    elif source["kind"] == "echo":
        busybox = static_busybox(art)
        out = workdir / "echo-server"
        env = go_env(art.arch, cgo=False)
        env["GOFLAGS"] = ""
        run(["go", "build", "-trimpath", "-ldflags", f"-s -w -X main.version={tag}", "-o", str(out), "."],
            cwd=ROOT / "tools/images/echo", env=env)
        files = {"bin/busybox": (busybox.read_bytes(), 0o755), "usr/local/bin/echo-server": (out.read_bytes(), 0o755),
                 "etc/passwd": (b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n", 0o644),
                 "etc/group": (b"root:x:0:\nnogroup:x:65534:\n", 0o644), "tmp/.keep": (b"", 0o644)}
        links = {f"bin/{applet}": "busybox" for applet in BUSYBOX_APPLETS}
        oci_archive(dest, name, tag, art.arch, files,
                    {"Entrypoint": ["/usr/local/bin/echo-server"], "Env": ["PATH=/usr/local/bin:/bin"],
                     "ExposedPorts": {"8080/tcp": {}}}, links)
    elif source["kind"] == "busybox":
        busybox = (busybox_from_source(workdir, source["source"], art.arch) if source.get("source")
                   else static_busybox(art))
        applets = run([str(busybox), "--list"]).split()
        oci_archive(dest, name, tag, art.arch, {**MINIMAL_ROOT, "bin/busybox": (busybox.read_bytes(), 0o755)},
                    {"Cmd": ["sh"], "Env": [f"PATH={E2E_PATH}"]},
                    {f"bin/{a}": "busybox" for a in applets if a != "busybox"})
    elif source["kind"] == "agnhost":
        comp = versions["components"][source["component"]]
        src = module_dir(comp["build"]["module"], comp["version"], workdir, art.arch) / "test/images/agnhost"
        stand_in = bool(source.get("stand_in"))
        held = (src / "VERSION").read_text().strip()
        if held != tag and not stand_in:
            raise ArtifactError(f"image {art.component}: {comp['version']} has agnhost {held}, "
                                f"versions.yml names {tag}")
        module = prepare_module(cache, next(i for i in all_items if i.component == source["component"]))
        out = workdir / "agnhost"
        go_build(f"{comp['build']['module']}/test/images/agnhost", out, module, art.arch, {}, comp["version"])
        root = e2e_base_root(cache, art.arch)
        # The user and group the Dockerfile adds (tests run as them by name).
        passwd = (root / "etc/passwd").read_bytes() + b"user-defined-in-image:x:1000:1000::/home/user:/bin/sh\n"
        group = ((root / "etc/group").read_bytes() + b"user-defined-in-image:x:1000:\n"
                 b"group-defined-in-image:x:50000:user-defined-in-image\n")
        files = {"agnhost": (out.read_bytes(), 0o755), "etc/passwd": (passwd, 0o644), "etc/group": (group, 0o644),
                 "localhost.crt": ((src / "porter/localhost.crt").read_bytes(), 0o644),
                 "localhost.key": ((src / "porter/localhost.key").read_bytes(), 0o644), "uploads/.keep": (b"", 0o644)}
        image_dir = src.parent / source.get("image", "agnhost")
        for path in sorted((image_dir / "html").glob("*")) if source.get("image") else []:
            files[path.name] = (path.read_bytes(), 0o644)  # kitten and nautilus: agnhost serving their files
        if stand_in:  # another image than the release's agnhost, with the same commands
            built = (image_dir / "VERSION").read_text().strip()
            files["STAND-IN"] = (f"{name}:{tag} stand-in, built from {image_dir.name} {built} of "
                                 f"{comp['version']}\n".encode(), 0o644)
        oci_archive(dest, name, tag, art.arch, files,
                    {"Entrypoint": ["/agnhost"], "Cmd": source.get("cmd", ["pause"]), "Env": [f"PATH={E2E_PATH}"],
                     "ExposedPorts": {f"{p}/tcp": {} for p in (80, 8080, 8081, 9376, 5000)}},
                    {"agnhost-2": "agnhost", "usr/local/bin/iperf": "/usr/bin/iperf"}, base=e2e_base(cache, art.arch))
    elif source["kind"] == "debian":
        oci_archive(dest, name, tag, art.arch, {"etc/k8s-arch-lab-image": (f"{name}:{tag}\n".encode(), 0o644)},
                    {"Cmd": ["bash"], "Env": [f"PATH={E2E_PATH}"]}, base=e2e_base(cache, art.arch))
    elif source["kind"] == "nginx":
        oci_archive(dest, name, tag, art.arch, {"var/www/html/index.html": (NGINX_INDEX, 0o644)},
                    {"Cmd": ["nginx", "-g", "daemon off;"], "Env": [f"PATH={E2E_PATH}"], "StopSignal": "SIGQUIT",
                     "ExposedPorts": {"80/tcp": {}}}, base=e2e_base(cache, art.arch))
    else:
        raise ArtifactError(f"image {art.component}: unknown source kind {source['kind']!r}")


# The conformance images' Debian base: what agnhost's Dockerfile installs on Alpine (bind-tools, curl, netcat,
# iproute2, iperf, bash, util-linux, socat), and nginx for the nginx images.
E2E_PACKAGES = ("bash", "dnsutils", "curl", "netcat-openbsd", "iproute2", "iperf", "socat", "procps", "nginx-light")
E2E_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASSWD = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
GROUP = b"root:x:0:\nnogroup:x:65534:\n"
# What an image of one static program also holds: its users and groups, and a /tmp.
MINIMAL_ROOT = {"etc/passwd": (PASSWD, 0o644), "etc/group": (GROUP, 0o644), "tmp/.keep": (b"", 0o644)}
NGINX_INDEX = (b"<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>\n"
               b"<body><h1>Welcome to nginx!</h1></body></html>\n")


def static_busybox(art: Artifact) -> Path:
    busybox = Path(os.environ.get("K8S_LAB_BUSYBOX", "/bin/busybox"))
    if not busybox.is_file() or "statically linked" not in run(["file", "-L", str(busybox)]):
        raise ArtifactError(f"the {art.component} image needs a static busybox at {busybox} "
                            "(Debian: busybox-static; run `make deps`)")
    return busybox


def busybox_from_source(workdir: Path, source: dict, arch: str) -> Path:
    """BusyBox built static with its default configuration from a source tarball of the Debian mirror (``source``:
    its pool path and pinned sha256); the program cached under the build folder."""
    out = workdir / "busybox"
    if out.is_file():
        return out
    if arch != host_arch():
        raise ArtifactError(f"BusyBox for {arch} is built on an {arch} host only")
    url = f"{debian_mirror().rstrip('/')}/{source['file']}"
    tarball = workdir / url.rsplit("/", 1)[1]
    if not tarball.is_file() or sha256_file(tarball) != source["sha256"]:
        fetch(url, tarball, timeout=120)
        if sha256_file(tarball) != source["sha256"]:
            tarball.unlink()
            raise ArtifactError(f"{url}: its sha256 is not versions.yml's")
    src = workdir / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir()
    run(["tar", "-xf", str(tarball), "-C", str(src), "--strip-components=1"])
    run(["make", "defconfig"], cwd=src)
    config = (src / ".config").read_text().replace("# CONFIG_STATIC is not set", "CONFIG_STATIC=y")
    # tc does not build against current kernel headers (CBQ is gone); no test uses it.
    (src / ".config").write_text(config.replace("CONFIG_TC=y", "# CONFIG_TC is not set"))
    run(["make", f"-j{os.cpu_count() or 1}", "busybox"], cwd=src)
    shutil.copyfile(src / "busybox", out)
    out.chmod(0o755)
    shutil.rmtree(src)
    return out


def debian_mirror() -> str:
    """The Debian mirror to debootstrap from: $K8S_LAB_DEBIAN_MIRROR, else the first one this host's apt uses."""
    if os.environ.get("K8S_LAB_DEBIAN_MIRROR"):
        return os.environ["K8S_LAB_DEBIAN_MIRROR"]
    texts = [p.read_text(errors="replace") for p in [Path("/etc/apt/sources.list"),
             *sorted(Path("/etc/apt/sources.list.d").glob("*"))] if p.is_file()]
    for word in " ".join(texts).split():
        if word.startswith(("http://", "https://")) and word.rstrip("/").endswith("/debian"):
            return word
    raise ArtifactError("no Debian mirror in /etc/apt/sources*: set K8S_LAB_DEBIAN_MIRROR")


def e2e_base_root(cache: Path, arch: str) -> Path:
    """A Debian minbase root with E2E_PACKAGES (debootstrap, as root; cached under .build/)."""
    suite = "bookworm"
    key = hashlib.sha256(" ".join((suite, arch, *E2E_PACKAGES)).encode()).hexdigest()[:12]
    workdir = cache / ".build" / f"e2e-base-{suite}-{arch}-{key}"
    root = workdir / "root"
    if (workdir / ".ready").exists():
        return root
    if arch != host_arch():
        raise ArtifactError(f"the conformance images' Debian base for {arch} is built on an {arch} host only")
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        raise ArtifactError("the conformance images' Debian base needs root and debootstrap (run `make deps`)")
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    run(["debootstrap", "--variant=minbase", f"--include={','.join(E2E_PACKAGES)}", suite, str(root),
         debian_mirror()])
    for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for path in (root / leftover).glob("*"):
            if path.is_file():
                path.unlink()
    (workdir / ".ready").touch()
    return root


def e2e_base(cache: Path, arch: str) -> Path:
    """The Debian base as one layer tar (sorted, numeric owners, no device nodes: the runtime makes /dev)."""
    root = e2e_base_root(cache, arch)
    layer = root.parent / "layer.tar"
    if not layer.exists():
        part = layer.with_name("layer.tar.part")
        run(["tar", "--sort=name", "--mtime=@0", "--numeric-owner", "--exclude=./dev/*", "--exclude=./proc/*",
             "--exclude=./sys/*", "-C", str(root), "-cf", str(part), "."])
        part.replace(layer)
    return layer


# --------------------------------------------------------------------------
# Driver


def ensure(cache: Path, source: str, arch: str, only: list[str] | None = None, *, log=print,
           versions: dict | None = None, mirror: str | None = None, sets: tuple[str, ...] | list[str] = (),
           trees: dict | None = None) -> dict:
    """Make the cache complete for ``arch`` from ``source`` (SOURCES); returns counts per outcome.

    ``cache`` changes nothing and fails naming every file the cache lacks; ``mirror`` takes what the cache
    lacks from the mirror only; ``upstream`` and ``build`` ignore any mirror; ``auto`` prefers the mirror
    (when one is set and holds the file) to upstream and to a build. ``sets``: the opt-in sets to add."""
    source = canonical_source(source)
    mirror = check_mirror(source, mirror)
    versions = versions or load_versions()
    items = everything = plan(versions, arch, sets)
    if only:
        unknown = set(only) - {i.id for i in items}
        if unknown:
            raise ArtifactError(f"unknown artifact id(s): {', '.join(sorted(unknown))}")
        items = [i for i in items if i.id in only]
    manifest = Manifest(cache)
    remote: dict | None = None  # the mirror's manifest, read when the first file is missing
    counts = {"cached": 0, "download": 0, "build": 0}
    lacking = []
    for art in sorted(items, key=lambda a: a.kind == "image"):  # images use the files
        problem = manifest.verify(art)
        if problem is None:
            counts["cached"] += 1
            continue
        if source == "cache":
            lacking.append(f"{art.id} ({art.relpath}): {problem}")
            continue
        if problem != "not in the manifest":
            log(f"  {art.id}: {problem}: fetching it again")
        manifest.forget(art.relpath)
        (cache / art.relpath).unlink(missing_ok=True)
        if remote is None:
            remote = mirror_manifest(mirror) if mirror and source in ("auto", "mirror") else {}
        entry = remote.get(art.relpath)
        from_mirror = entry is not None and entry.get("version") == art.version
        if source == "mirror" and not from_mirror:
            raise ArtifactError(f"the mirror {mirror} does not hold {art.id} {art.version} ({art.arch}): "
                                f"{art.relpath}")
        chosen = "download" if from_mirror else choose_source(art, source, trees=trees)
        started = time.monotonic()
        log(f"  {art.id} {art.version} ({art.arch}): {'mirror' if from_mirror else chosen} ...")
        provenance = None
        if from_mirror:
            # The mirror's own manifest names the checksum (its file may have been built) and what it was built from.
            download(art, cache / art.relpath, expected=entry["sha256"], url=f"{mirror}/{art.relpath}")
            chosen, provenance = entry.get("source", "download"), entry.get("built_from")
        elif chosen == "download":
            download(art, cache / art.relpath)
        elif art.kind == "image":
            build_image(cache, art, versions, everything)  # an image may be built from any file's module
        elif art.build.get("kind") == "tree":
            provenance = build_from_tree(cache, art, Path(trees[art.component]), log)
        else:
            build_file(cache, art)
        manifest.record(art, chosen, provenance)
        counts[chosen] += 1
        log(f"  {art.id}: done in {time.monotonic() - started:.0f}s -> {art.relpath}")
    if lacking:
        raise ArtifactError(f"the cache {cache} lacks {len(lacking)} file(s) (source cache fetches nothing; "
                            "run `make artifacts` with SOURCE=auto, mirror, upstream or build):\n  "
                            + "\n  ".join(lacking))
    return counts


def lab_artifact_settings() -> dict:
    """settings.yml's ``artifacts`` (source, and the mirror: K8S_LAB_MIRROR wins over ``artifacts.mirror``)."""
    from tools import settings  # only the CLI reads the lab's settings

    try:
        return settings.artifact_settings()
    except settings.SettingsError as exc:
        raise ArtifactError(str(exc)) from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tools.artifacts", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", choices=("fill", "plan", "path"), default="fill",
                        help="fill (the default): make the cache complete; "
                             "plan: print the nodes' artifact plan as JSON, change nothing; "
                             "path: print where a release file is in the cache (--only ID)")
    parser.add_argument("--source", help="auto, cache, mirror, upstream or build (fill's default: auto; plan's: "
                                         "settings.yml artifacts.source, and build is not for the nodes)")
    parser.add_argument("--cache", type=Path, default=default_cache(),
                        help=f"the artifact cache (default: {default_cache()}; tools/locations.py)")
    parser.add_argument("--arch", action="append", help="amd64 or arm64, repeatable (default: this host's)")
    parser.add_argument("--only", nargs="*", help="fill: artifact ids to ensure (default: all)")
    parser.add_argument("--mirror", help="base URL of a mirror laid out like the cache, checked against its "
                                         "manifest (default: $K8S_LAB_MIRROR, else settings.yml artifacts.mirror)")
    parser.add_argument("--with", dest="sets", action="append", default=[], metavar="SET",
                        help="fill, path, --list: add an opt-in set of versions.yml (conformance: the upstream test "
                             "suite and its images; not in `make artifacts`)")
    parser.add_argument("--tree", action="append", default=[], metavar="COMPONENT=PATH",
                        help="fill: the source tree a component of build kind tree is built from (a checkout or "
                             "snapshot of its repository; default: $K8S_LAB_TREE_<COMPONENT>), e.g. crio=~/src/cri-o")
    parser.add_argument("--list", action="store_true", help="fill: print the plan and the cache state, change nothing")
    parser.add_argument("--output", type=Path, help="plan: write the JSON to this file instead of stdout")
    args = parser.parse_args(argv)
    try:
        if os.environ.get("K8S_LAB_ARTIFACT_SOURCE"):
            raise ArtifactError("K8S_LAB_ARTIFACT_SOURCE is no longer read: use --source "
                                "(`make artifacts SOURCE=...`), or artifacts.source in settings.yml for the nodes")
        arches = [ARCHES.get(a, a) for a in args.arch] if args.arch else [host_arch()]
        known = optional_sets(load_versions())
        for name in args.sets:
            if name not in known:
                raise ArtifactError(f"--with {name}: versions.yml has no such set (its sets: {', '.join(known)})")
        for arch, given in zip(arches, args.arch or arches, strict=True):
            if arch not in SUPPORTED:
                raise ArtifactError(f"unsupported --arch {given!r}: use amd64 or arm64")
        lab = lab_artifact_settings()
        mirror = args.mirror if args.mirror is not None else lab["mirror"]
        # The opt-in sets the settings' nodes need (a profile with CRI-O or Docker Engine workers: runtimes).
        args.sets = list(dict.fromkeys(args.sets + lab.get("sets", [])))
        from_trees = [c for c, comp in load_versions()["components"].items()
                      if comp.get("build", {}).get("kind") == "tree"]
        trees = {c: os.environ[source_tree.env_var(c)] for c in from_trees if os.environ.get(source_tree.env_var(c))}
        for given in args.tree:
            name, _, path = given.partition("=")
            if not path or name not in from_trees:
                raise ArtifactError(f"--tree {given}: expected COMPONENT=PATH with a component built from a tree "
                                    "(versions.yml build kind tree: "
                                    f"{', '.join(from_trees)})")
            trees[name] = path
        if args.command == "plan":
            cache = args.cache.expanduser().absolute()
            text = json.dumps(node_plan(load_versions(), arches, args.source or lab["source"], mirror, cache),
                              indent=2) + "\n"
            if args.output:
                args.output.write_text(text)
            else:
                sys.stdout.write(text)
            return 0
        cache = args.cache.expanduser().resolve()
        if args.command == "path":
            ids = args.only or []
            if len(ids) != 1:
                raise ArtifactError("path needs --only with one release file id")
            print(cached_file(ids[0], arches[0], tuple(args.sets), cache))
            return 0
        if args.list:
            manifest = Manifest(cache)
            for arch in arches:
                for art in plan(load_versions(), arch, args.sets):
                    state = manifest.verify(art) or "ok"
                    print(f"{art.id:28} {art.version:10} {state:24} {art.relpath}")
            return 0
        source = canonical_source(args.source or "auto")
        with fill_lock(cache):
            for arch in arches:
                started = time.monotonic()
                via = f", mirror {mirror}" if mirror and source in ("auto", "mirror") else ""
                print(f"artifact cache {cache} ({arch}, source {source}{via})")
                counts = ensure(cache, source, arch, args.only, mirror=mirror, sets=args.sets, trees=trees)
                print(f"artifacts: {counts['cached']} cached, {counts['download']} downloaded, "
                      f"{counts['build']} built in {time.monotonic() - started:.1f}s")
        return 0
    except ArtifactError as exc:
        print(f"artifacts: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
