"""Unit tests of the artifact cache logic (no network, no Go builds)."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
from pathlib import Path

import pytest

from tools import artifacts as A


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_artifact(**overrides) -> A.Artifact:
    fields = dict(
        id="thing",
        component="thing",
        version="v1.0.0",
        arch="amd64",
        url="https://example.invalid/releases/v1.0.0/thing",
        relpath="example.invalid/releases/v1.0.0/thing",
        official_sha256=sha(b"payload"),
        kind="file",
    )
    fields.update(overrides)
    return A.Artifact(**fields)


def serve(files: dict[str, bytes]):
    """An opener that serves ``files`` by URL, like urllib would."""
    calls: list[str] = []

    def opener(url: str, dest: Path, *, timeout: float) -> None:
        calls.append(url)
        if url not in files:
            raise OSError(f"unreachable: {url}")
        dest.write_bytes(files[url])

    opener.calls = calls
    return opener


# --- versions file and plan ------------------------------------------------


def test_versions_file_pins_every_component():
    versions = A.load_versions()
    comps = versions["components"]
    assert comps["kubernetes"]["version"] == "v1.37.2"
    assert comps["etcd"]["version"].startswith(("v3.6.", "v3.7."))
    assert comps["containerd"]["version"].startswith("v2.3.")
    assert comps["runc"]["version"].startswith("v1.4.")
    assert comps["cni_plugins"]["version"].startswith("v1.9.")
    assert comps["crictl"]["version"].startswith("v1.37.")
    assert comps["coredns"]["version"].startswith("v1.14.")
    assert versions["images"]["pause"]["version"].startswith("3.10.")


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_plan_lays_files_out_like_the_download_sites(arch):
    items = {a.id: a for a in A.plan(A.load_versions(), arch)}
    assert items["kubelet"].relpath == f"dl.k8s.io/release/v1.37.2/bin/linux/{arch}/kubelet"
    assert items["etcd"].relpath.startswith("github.com/etcd-io/etcd/releases/download/")
    assert items["etcd"].relpath.endswith(f"-linux-{arch}.tar.gz")
    assert items["image/pause"].relpath.startswith("images/registry.k8s.io/pause/")
    for art in items.values():
        if art.kind == "file":
            assert art.downloadable, f"{art.id} has neither a pinned sha256 nor a sha256_url"
            if art.official_sha256:
                assert len(art.official_sha256) == 64
        assert "latest" not in art.version


def test_plan_covers_everything_the_cluster_needs():
    ids = {a.id for a in A.plan(A.load_versions(), "amd64")}
    need = {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl",
            "etcd", "containerd", "runc", "cni-plugins", "crictl", "coredns",
            "image/pause", "image/coredns", "image/echo"}
    assert need <= ids


# --- the nodes' plan -----------------------------------------------------------


def test_checksum_files_of_one_hash_or_of_a_whole_release():
    one, other = "a" * 64, "b" * 64
    assert A.checksum_in(f"{one}\n", "kubelet") == one
    release = f"{other}  kube-bench_0.15.1_linux_arm64.tar.gz\n{one}  kube-bench_0.15.1_linux_amd64.tar.gz\n"
    assert A.checksum_in(release, "kube-bench_0.15.1_linux_amd64.tar.gz") == one
    assert A.checksum_in(f"{one} *f.tgz\n", "f.tgz") == one
    assert A.checksum_in(release, "f.tgz") is None
    assert A.checksum_in("not a hash\n", "f.tgz") is None


def test_a_checksum_url_may_name_the_version():
    art = next(a for a in A.plan(A.load_versions(), "amd64") if a.id == "kube-bench")
    assert art.sha256_url == ("https://github.com/aquasecurity/kube-bench/releases/download/v0.15.1/"
                              "kube-bench_0.15.1_checksums.txt")
    assert art.url.endswith("/v0.15.1/kube-bench_0.15.1_linux_amd64.tar.gz")


def test_node_plan_lists_what_the_nodes_need_and_where_it_ends_up(tmp_path):
    got = A.node_plan(A.load_versions(), ["amd64"], "cache", "", tmp_path)
    assert (got["source"], got["mirror"], got["cache_dir"]) == ("cache", "", str(tmp_path))
    amd64 = got["arches"]["amd64"]
    files = {f["id"]: f for f in amd64["files"]}
    assert {i for i, f in files.items() if f["nodes"] == "control_plane"} == {
        "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd"}
    assert {i for i, f in files.items() if f["nodes"] == "all"} == {
        "kubelet", "kube-proxy", "containerd", "runc", "cni-plugins", "crictl", "kube-bench"}
    assert "coredns" not in files, "the CoreDNS release file only feeds the image's build on the host"
    assert [i["id"] for i in amd64["images"]] == ["image/pause", "image/coredns", "image/echo"]
    etcd = files["etcd"]
    assert etcd["archive"] and len(etcd["sha256"]) == 64 and etcd["sha256_url"] is None
    assert etcd["url"] == f"https://{etcd['relpath']}"
    member = "etcd-v3.7.2-linux-amd64/etcdctl"
    assert etcd["binaries"]["etcdctl"] == {"member": member,
                                           "path": f"{tmp_path}/.extracted/{etcd['relpath']}/{member}"}
    kubelet = files["kubelet"]
    assert not kubelet["archive"] and kubelet["sha256"] is None
    assert kubelet["sha256_url"] == kubelet["url"] + ".sha256"
    assert kubelet["binaries"]["kubelet"]["path"] == f"{tmp_path}/{kubelet['relpath']}"
    assert amd64["paths"]["bridge"].endswith("cni-plugins-linux-amd64-v1.9.1.tgz/bridge"), "./bridge loses its ./"
    assert amd64["paths"]["image/pause"] == f"{tmp_path}/images/registry.k8s.io/pause/3.10.2/image-linux-amd64.tar"
    every_binary = {n: b["path"] for f in amd64["files"] for n, b in f["binaries"].items()}
    assert amd64["paths"] == {**every_binary, **{i["id"]: i["path"] for i in amd64["images"]}}
    json.dumps(got)  # what the inventory hands to Ansible


def test_node_plan_agrees_with_the_cache_fill():
    versions = A.load_versions()
    for arch in ("amd64", "arm64"):
        filled = {a.relpath: a for a in A.plan(versions, arch)}
        node = A.node_plan(versions, [arch])["arches"][arch]
        for item in node["files"] + node["images"]:
            art = filled[item["relpath"]]
            assert (art.id, art.version) == (item["id"], item["version"])


def test_node_plan_refuses_what_the_nodes_cannot_do(tmp_path):
    versions = A.load_versions()
    with pytest.raises(A.ArtifactError, match="the nodes cannot build"):
        A.node_plan(versions, ["amd64"], "build")
    with pytest.raises(A.ArtifactError, match="K8S_LAB_MIRROR"):
        A.node_plan(versions, ["amd64"], "mirror", "")
    with pytest.raises(A.ArtifactError, match="not an http"):
        A.node_plan(versions, ["amd64"], "auto", "ftp://cache")
    assert A.node_plan(versions, ["amd64"], "download")["source"] == "upstream"
    assert A.node_plan(versions, [], "mirror", "http://cache:8000/")["mirror"] == "http://cache:8000"
    broken = json.loads(json.dumps(versions))
    del broken["components"]["runc"]["files"]["runc"]["nodes"]
    with pytest.raises(A.ArtifactError, match=r"components\.runc\.files\.runc\.nodes: None"):
        A.node_plan(broken, ["amd64"])


def test_plan_command_prints_the_node_plan(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("K8S_LAB_MIRROR", raising=False)
    monkeypatch.delenv("K8S_LAB_ARTIFACT_SOURCE", raising=False)
    monkeypatch.delenv("K8S_LAB_SETTINGS", raising=False)
    assert A.main(["plan", "--source", "cache", "--arch", "arm64", "--arch", "x86_64", "--cache", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == A.node_plan(A.load_versions(), ["arm64", "amd64"], "cache", "", tmp_path)
    out = tmp_path / "plan.json"
    assert A.main(["plan", "--output", str(out), "--mirror", "http://m:1", "--cache", str(tmp_path)]) == 0
    written = json.loads(out.read_text())
    assert written["source"] == "auto" and written["mirror"] == "http://m:1", "settings.yml's source, given mirror"
    monkeypatch.setenv("K8S_LAB_MIRROR", "http://env:2")
    assert A.main(["plan", "--output", str(out), "--cache", str(tmp_path)]) == 0
    assert json.loads(out.read_text())["mirror"] == "http://env:2"
    assert A.main(["plan", "--source", "build"]) == 1
    assert "the nodes cannot build" in capsys.readouterr().err


def test_the_old_source_variable_is_refused(monkeypatch, capsys):
    monkeypatch.setenv("K8S_LAB_ARTIFACT_SOURCE", "build")
    assert A.main(["--list"]) == 1
    assert "K8S_LAB_ARTIFACT_SOURCE is no longer read" in capsys.readouterr().err


# --- source choice ------------------------------------------------------------


def test_auto_downloads_when_the_host_resolves():
    art = file_artifact()
    assert A.choose_source(art, "auto", resolver=lambda h: True, has_go=lambda: True) == "download"


def test_auto_builds_when_the_host_does_not_resolve_and_go_exists():
    art = file_artifact()
    assert A.choose_source(art, "auto", resolver=lambda h: False, has_go=lambda: True) == "build"


def test_auto_builds_when_no_official_checksum_is_known():
    art = file_artifact(official_sha256=None, sha256_url=None)
    resolved = []
    choice = A.choose_source(art, "auto", resolver=lambda h: resolved.append(h) or True, has_go=lambda: True)
    assert choice == "build"
    assert resolved == [], "no network probe is needed when download is impossible anyway"


def test_auto_without_network_or_go_is_one_clear_error():
    art = file_artifact()
    with pytest.raises(A.ArtifactError) as err:
        A.choose_source(art, "auto", resolver=lambda h: False, has_go=lambda: False)
    message = str(err.value)
    assert "does not resolve" in message and "Go" in message and "K8S_LAB_MIRROR" in message


def test_explicit_source_is_honoured_and_images_are_always_built():
    art = file_artifact()
    assert A.choose_source(art, "build", resolver=lambda h: True, has_go=lambda: True) == "build"
    assert A.choose_source(art, "upstream", resolver=lambda h: False, has_go=lambda: True) == "download"
    image = file_artifact(kind="image", official_sha256=None)
    assert A.choose_source(image, "upstream", resolver=lambda h: True, has_go=lambda: True) == "build"
    with pytest.raises(A.ArtifactError, match="unknown source 'ftp'"):
        A.choose_source(art, "ftp")


def test_one_vocabulary_for_the_source():
    assert A.SOURCES == ("auto", "cache", "mirror", "upstream", "build")
    assert A.NODE_SOURCES == ("auto", "cache", "mirror", "upstream"), "the nodes cannot build"
    assert A.canonical_source("download") == "upstream", "the old spelling still works"
    with pytest.raises(A.ArtifactError, match="the nodes cannot build"):
        A.canonical_source("build", A.NODE_SOURCES)
    settings_enum = json.loads((A.ROOT / "tools" / "settings.schema.json").read_text())[
        "properties"]["artifacts"]["properties"]["source"]["enum"]
    assert tuple(settings_enum) == A.NODE_SOURCES


# --- download -----------------------------------------------------------------


def test_download_accepts_the_pinned_checksum(tmp_path):
    art = file_artifact()
    dest = tmp_path / art.relpath
    A.download(art, dest, opener=serve({art.url: b"payload"}), pause=lambda s: None)
    assert dest.read_bytes() == b"payload"


def test_download_rejects_a_bad_checksum_and_keeps_nothing(tmp_path):
    art = file_artifact()
    dest = tmp_path / art.relpath
    opener = serve({art.url: b"tampered"})
    with pytest.raises(A.ArtifactError, match="checksum mismatch"):
        A.download(art, dest, opener=opener, pause=lambda s: None)
    assert not dest.exists()
    assert not dest.with_name(dest.name + ".part").exists()
    assert len(opener.calls) == 1, "a wrong checksum is not retried"


def test_download_uses_the_published_sha256_file_when_none_is_pinned(tmp_path):
    art = file_artifact(official_sha256=None, sha256_url="https://example.invalid/thing.sha256")
    files = {art.url: b"payload", art.sha256_url: (sha(b"payload") + "  thing\n").encode()}
    A.download(art, tmp_path / "thing", opener=serve(files), pause=lambda s: None)
    files[art.sha256_url] = (sha(b"other") + "\n").encode()
    with pytest.raises(A.ArtifactError, match="checksum mismatch"):
        A.download(art, tmp_path / "thing2", opener=serve(files), pause=lambda s: None)


def test_download_retries_network_errors_then_gives_up(tmp_path):
    art = file_artifact()
    pauses = []
    opener = serve({})
    with pytest.raises(A.ArtifactError, match="after 3 attempts"):
        A.download(art, tmp_path / "x", retries=3, opener=opener, pause=pauses.append)
    assert len(opener.calls) == 3 and len(pauses) == 2


def test_download_refuses_without_any_official_checksum(tmp_path):
    art = file_artifact(official_sha256=None, sha256_url=None)
    with pytest.raises(A.ArtifactError, match="no official sha256"):
        A.download(art, tmp_path / "x", opener=serve({art.url: b"payload"}), pause=lambda s: None)


# --- manifest -------------------------------------------------------------------


def put(cache: Path, art: A.Artifact, data: bytes, source: str = "build") -> A.Manifest:
    target = cache / art.relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    manifest = A.Manifest(cache)
    manifest.record(art, source)
    return manifest


def test_manifest_records_and_verifies(tmp_path):
    art = file_artifact()
    put(tmp_path, art, b"payload", source="download")
    reloaded = A.Manifest(tmp_path)
    assert reloaded.verify(art) is None
    entry = json.loads((tmp_path / A.MANIFEST).read_text())["files"][art.relpath]
    assert entry["sha256"] == sha(b"payload") and entry["source"] == "download" and entry["version"] == "v1.0.0"
    assert f"{sha(b'payload')}  {art.relpath}" in (tmp_path / "SHA256SUMS").read_text()


def test_manifest_keeps_the_size_and_time_its_checksum_was_computed_at(tmp_path):
    """The artifacts role re-hashes a cached file only when its size or mtime differ from the manifest's."""
    art = file_artifact()
    put(tmp_path, art, b"payload")
    target = tmp_path / art.relpath
    entry = json.loads((tmp_path / A.MANIFEST).read_text())["files"][art.relpath]
    assert (entry["size"], entry["mtime"]) == (7, target.stat().st_mtime)
    os.utime(target, (1_000_000_000.5, 1_000_000_000.5))  # touched, same content: verified, and the time kept
    assert A.Manifest(tmp_path).verify(art) is None
    assert json.loads((tmp_path / A.MANIFEST).read_text())["files"][art.relpath]["mtime"] == 1_000_000_000.5


def test_manifest_detects_corruption_truncation_and_loss(tmp_path):
    art = file_artifact()
    put(tmp_path, art, b"payload")
    target = tmp_path / art.relpath
    target.write_bytes(b"paylOad")
    assert "corrupted" in A.Manifest(tmp_path).verify(art)
    target.write_bytes(b"pay")
    assert "truncated" in A.Manifest(tmp_path).verify(art)
    target.unlink()
    assert "missing" in A.Manifest(tmp_path).verify(art)


def test_manifest_detects_a_version_change(tmp_path):
    art = file_artifact()
    put(tmp_path, art, b"payload")
    newer = file_artifact(version="v1.0.1")
    assert "want v1.0.1" in A.Manifest(tmp_path).verify(newer)


def test_downloaded_file_must_still_match_the_official_checksum(tmp_path):
    art = file_artifact()
    put(tmp_path, art, b"something else", source="download")
    assert "official" in A.Manifest(tmp_path).verify(art)


def test_a_damaged_manifest_only_costs_a_refetch(tmp_path):
    (tmp_path / A.MANIFEST).write_text("{not json")
    assert A.Manifest(tmp_path).verify(file_artifact()) == "not in the manifest"


# --- ensure(): the whole loop, with a fake source ----------------------------------


def test_ensure_repairs_a_corrupted_file_and_keeps_intact_ones(tmp_path, monkeypatch):
    good, bad = file_artifact(id="good", relpath="h/good"), file_artifact(id="bad", relpath="h/bad")
    versions = {"components": {}}
    monkeypatch.setattr(A, "plan", lambda v, arch, sets=(): [good, bad])
    built = []

    def fake_build(cache, art):
        built.append(art.id)
        (cache / art.relpath).parent.mkdir(parents=True, exist_ok=True)
        (cache / art.relpath).write_bytes(b"payload")

    monkeypatch.setattr(A, "build_file", fake_build)
    counts = A.ensure(tmp_path, "build", "amd64", versions=versions, log=lambda *a: None)
    assert counts == {"cached": 0, "download": 0, "build": 2}
    (tmp_path / "h/bad").write_bytes(b"garbage")
    built.clear()
    counts = A.ensure(tmp_path, "build", "amd64", versions=versions, log=lambda *a: None)
    assert built == ["bad"] and counts["cached"] == 1
    assert A.Manifest(tmp_path).verify(bad) is None


def test_ensure_takes_a_mirrors_checksums(tmp_path, monkeypatch):
    art = file_artifact(official_sha256=None)
    monkeypatch.setattr(A, "plan", lambda v, arch, sets=(): [art])
    mirror = "http://127.0.0.1:1/mirror"
    remote = {art.relpath: {"sha256": sha(b"built here"), "version": art.version, "source": "build"}}
    monkeypatch.setattr(A, "mirror_manifest", lambda m: remote)
    monkeypatch.setattr(A, "fetch", serve({f"{mirror}/{art.relpath}": b"built here"}))
    A.ensure(tmp_path, "auto", "amd64", versions={"components": {}}, mirror=mirror, log=lambda *a: None)
    assert (tmp_path / art.relpath).read_bytes() == b"built here"
    assert A.Manifest(tmp_path).entries[art.relpath]["source"] == "build"


def test_source_cache_changes_nothing_and_names_what_is_lacking(tmp_path, monkeypatch):
    good, bad = file_artifact(id="good", relpath="h/good"), file_artifact(id="bad", relpath="h/bad")
    monkeypatch.setattr(A, "plan", lambda v, arch, sets=(): [good, bad])
    put(tmp_path, good, b"payload")
    put(tmp_path, bad, b"payload")
    (tmp_path / "h/bad").write_bytes(b"pay")
    before = (tmp_path / A.MANIFEST).read_text()
    with pytest.raises(A.ArtifactError, match=r"lacks 1 file.*\n  bad \(h/bad\): size 3 != 7"):
        A.ensure(tmp_path, "cache", "amd64", versions={"components": {}}, log=lambda *a: None)
    assert (tmp_path / "h/bad").read_bytes() == b"pay" and (tmp_path / A.MANIFEST).read_text() == before
    (tmp_path / "h/bad").write_bytes(b"payload")
    assert A.ensure(tmp_path, "cache", "amd64", versions={"components": {}})["cached"] == 2


def test_source_mirror_takes_only_the_mirror(tmp_path, monkeypatch):
    art = file_artifact()
    monkeypatch.setattr(A, "plan", lambda v, arch, sets=(): [art])
    monkeypatch.setattr(A, "mirror_manifest", lambda m: {})
    with pytest.raises(A.ArtifactError, match="the mirror http://m does not hold thing"):
        A.ensure(tmp_path, "mirror", "amd64", versions={"components": {}}, mirror="http://m/", log=lambda *a: None)
    with pytest.raises(A.ArtifactError, match="needs a mirror"):
        A.ensure(tmp_path, "mirror", "amd64", versions={"components": {}}, log=lambda *a: None)


def test_source_upstream_ignores_a_mirror(tmp_path, monkeypatch):
    art = file_artifact()
    monkeypatch.setattr(A, "plan", lambda v, arch, sets=(): [art])
    monkeypatch.setattr(A, "mirror_manifest", lambda m: pytest.fail("the mirror was asked"))
    monkeypatch.setattr(A, "fetch", serve({art.url: b"payload"}))
    counts = A.ensure(tmp_path, "upstream", "amd64", versions={"components": {}}, mirror="http://m",
                      log=lambda *a: None)
    assert counts["download"] == 1 and A.Manifest(tmp_path).entries[art.relpath]["source"] == "download"


def test_a_complete_cache_does_not_ask_the_mirror(tmp_path, monkeypatch):
    art = file_artifact()
    monkeypatch.setattr(A, "plan", lambda v, arch, sets=(): [art])
    put(tmp_path, art, b"payload")
    monkeypatch.setattr(A, "mirror_manifest", lambda m: pytest.fail("the mirror was asked"))
    assert A.ensure(tmp_path, "auto", "amd64", versions={"components": {}}, mirror="http://m")["cached"] == 1


# --- archives ---------------------------------------------------------------------


def test_oci_archive_names_the_image(tmp_path):
    dest = tmp_path / "img.tar"
    A.oci_archive(dest, "registry.k8s.io/pause", "3.10.2", "amd64", {"pause": (b"\x7fELF", 0o755)},
                  {"Entrypoint": ["/pause"]}, {"bin/sh": "busybox"})
    with tarfile.open(dest) as tar:
        index = json.load(tar.extractfile("index.json"))
        docker = json.load(tar.extractfile("manifest.json"))
        names = tar.getnames()
    annotations = index["manifests"][0]["annotations"]
    assert annotations["io.containerd.image.name"] == "registry.k8s.io/pause:3.10.2"
    assert docker[0]["RepoTags"] == ["registry.k8s.io/pause:3.10.2"]
    assert "oci-layout" in names
    for blob in [index["manifests"][0]["digest"]] + [docker[0]["Config"].split("/")[-1]]:
        assert f"blobs/sha256/{blob.removeprefix('sha256:')}" in names


def test_archives_are_reproducible(tmp_path):
    src = tmp_path / "bin"
    src.write_bytes(b"binary")
    A.write_tar(tmp_path / "a.tgz", {"x/bin": src}, gzip=True)
    A.write_tar(tmp_path / "b.tgz", {"x/bin": src}, gzip=True)
    assert (tmp_path / "a.tgz").read_bytes() == (tmp_path / "b.tgz").read_bytes()


def test_staging_replaces_map_to_published_modules(tmp_path):
    (tmp_path / "go.mod").write_text(
        "module k8s.io/kubernetes\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n"
        "\tk8s.io/kubelet => ./staging/src/k8s.io/kubelet\n)\n"
    )
    assert A.staging_replaces(tmp_path, "v1.37.2") == ["k8s.io/api=k8s.io/api@v0.37.2",
                                                       "k8s.io/kubelet=k8s.io/kubelet@v0.37.2"]


def test_kubernetes_binaries_are_stamped_with_the_pinned_version():
    flags = A.kubernetes_ldflags("v1.37.2")
    assert "-X k8s.io/component-base/version.gitVersion=v1.37.2" in flags
    assert "-X k8s.io/client-go/pkg/version.gitMinor=37" in flags


def test_one_fill_of_a_cache_at_a_time(tmp_path):
    """A second fill of the same cache waits for the first, boundedly, and then says who holds it."""
    from tools.artifacts import ArtifactError, fill_lock

    said: list[str] = []
    held = r"filled by pid \d+ and was not released within 0s"
    with (fill_lock(tmp_path), pytest.raises(ArtifactError, match=held),
          fill_lock(tmp_path, wait=0, poll=0, log=said.append)):
        pass
    with fill_lock(tmp_path, wait=0):  # released: the next fill takes it at once
        pass
