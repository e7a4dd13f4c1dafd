"""`lab status` when the API server goes away between two looks: a finding in the report, not a traceback."""

from __future__ import annotations

from labs import status


class GoneAfterPing:
    """A lab whose API server answers the first request, then nothing; every unit active."""

    server = "https://192.0.2.10:6443"
    machines = nodes = ["cp1", "w1"]
    control_plane = ["cp1"]

    def ping(self) -> str:
        return "v1.37.2"

    def ready_nodes(self) -> list[str]:
        raise ConnectionRefusedError("[Errno 111] Connection refused")

    def leaders(self) -> dict:
        raise ConnectionRefusedError("[Errno 111] Connection refused")

    def machine_ip(self, machine: str) -> str:
        return {"cp1": "192.0.2.11", "w1": "192.0.2.21"}[machine]

    def control_plane_components(self, machine: str) -> list[str]:
        return ["kube-apiserver"] if machine == "cp1" else []

    def runtime_units(self, machine: str) -> dict[str, str]:
        return {"containerd": "containerd"}

    def on_each(self, machines, func):
        return {m: func(m) for m in machines}

    def sh(self, machine: str, script: str, check: bool = True) -> str:
        return "\n".join(f"{part.split()[1]} active" for part in script.split("; "))


def test_an_api_server_that_stops_answering_is_reported(monkeypatch):
    monkeypatch.setattr(status, "vagrant_machines", dict)
    report = status.status(GoneAfterPing())
    assert report.problems == ["API server does not answer", "API server does not answer"]
    assert any("Connection refused" in line for line in report.lines)
    assert "  ok    cp1: kube-apiserver" in report.lines
    assert not any("Ready" in line for line in report.lines)
