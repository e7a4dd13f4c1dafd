"""`lab certs`: every certificate of the lab, where it is, whose identity it carries, who issued it and when it
expires, sorted by expiry; those that expire within the warning window (30 days) are flagged, expired ones too.

What is read: what each component actually serves (a TLS handshake with every API server, etcd member, kubelet,
scheduler and controller manager, from its own machine: the certificate in use, whatever file it came from); on
every machine, the certificate files under the components' folders and the client certificates embedded in their
kubeconfigs; on the controller, the PKI in the state folder and its kubeconfigs. Only certificate blocks are read: a
file that also holds a private key (the kubelet's rotated *-current.pem) gives its certificate alone, a kubeconfig
its client-certificate-data, never its key."""

from __future__ import annotations

import base64
import datetime
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from labs.i18n import _, tr
from labs.paths import state_dir

if TYPE_CHECKING:
    from labs.lab import Lab

WARN_DAYS = 30
# The folders the roles put certificates and kubeconfigs in, on every machine.
NODE_FOLDERS = ("/etc/kubernetes", "/etc/etcd", "/var/lib/kubelet", "/var/lib/kube-proxy")
PEM = re.compile(r"-----BEGIN CERTIFICATE-----\s+.*?-----END CERTIFICATE-----", re.S)
# One shell command per machine: each certificate file's certificate blocks, and each kubeconfig's embedded client
# certificate, behind a line that names the file (keys are never printed). The pods' own volumes (the cluster CA
# that every service account token volume carries) are left out.
GATHER = (
    "for f in $(find {folders} -path /var/lib/kubelet/pods -prune -o -type f \\( -name '*.crt' -o -name '*.pem' \\) "
    "-print 2>/dev/null | sort); do "
    "echo \"@@ $f\"; sed -n '/-----BEGIN CERTIFICATE-----/,/-----END CERTIFICATE-----/p' \"$f\"; done; "
    "for f in $(find {folders} -path /var/lib/kubelet/pods -prune -o -type f \\( -name '*kubeconfig*' -o -name "
    "'kubeconfig' \\) -print 2>/dev/null | sort); do "
    "echo \"@@ $f\"; sed -n 's/^ *client-certificate-data: *//p' \"$f\"; done; true"
)

# What each kind of machine serves over TLS (component, address, port; the address "node" is the machine's own, on
# which its peers and the API server reach it; the scheduler and the controller manager listen on loopback only).
SERVED = {
    "etcd": [("etcd", "node", "etcd_client"), ("etcd (peers)", "node", "etcd_peer")],
    "control_plane": [("kube-apiserver", "node", "api_server"), ("kube-controller-manager", "127.0.0.1", 10257),
                      ("kube-scheduler", "127.0.0.1", 10259)],
    "kubelet": [("kubelet", "node", 10250)],
}
# One handshake per port with openssl (every node has it: ca-certificates depends on it), the served chain's
# certificates behind a line that names the endpoint. No client certificate is offered: the server's comes first.
SERVE_PROBE = ("echo '@@ {label}'; timeout 10 openssl s_client -connect {address}:{port} -showcerts </dev/null "
               "2>/dev/null | sed -n '/-----BEGIN CERTIFICATE-----/,/-----END CERTIFICATE-----/p'")


@dataclass
class Cert:
    machine: str  # a node's name, or "controller"
    path: str
    subject: str  # CN, and O when there is one: the identity Kubernetes sees
    issuer: str
    not_after: str  # ISO 8601, UTC
    days_left: float
    is_ca: bool

    @property
    def state(self) -> str:
        if self.days_left < 0:
            return "expired"
        return "soon" if self.days_left < WARN_DAYS else "ok"


def _name(name) -> str:
    from cryptography.x509.oid import NameOID

    cn = [a.value for a in name.get_attributes_for_oid(NameOID.COMMON_NAME)]
    org = [a.value for a in name.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    return ", ".join([f"CN={v}" for v in cn] + [f"O={v}" for v in org]) or name.rfc4514_string()


def parse(machine: str, path: str, pem: str, now: datetime.datetime) -> list[Cert]:
    """The certificates of one PEM text (a file's blocks, or a kubeconfig's base64 data)."""
    from cryptography import x509

    if "BEGIN CERTIFICATE" not in pem:
        try:
            pem = base64.b64decode(pem.strip(), validate=False).decode()
        except (ValueError, UnicodeDecodeError):
            return []
    found = []
    for block in PEM.findall(pem):
        try:
            cert = x509.load_pem_x509_certificate(block.encode())
        except ValueError:
            continue
        try:
            is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        except x509.ExtensionNotFound:
            is_ca = False
        after = cert.not_valid_after_utc
        found.append(Cert(machine, path, _name(cert.subject), _name(cert.issuer), after.isoformat(),
                          round((after - now).total_seconds() / 86400, 2), is_ca))
    return found


def parse_gathered(machine: str, text: str, now: datetime.datetime) -> list[Cert]:
    """What GATHER printed on one machine: '@@ path' lines, each followed by that file's certificate text."""
    certs, path, lines = [], None, []

    def flush() -> None:
        if path is not None:
            certs.extend(parse(machine, path, "\n".join(lines), now))

    for line in text.splitlines():
        if line.startswith("@@ "):
            flush()
            path, lines = line[3:], []
        else:
            lines.append(line)
    flush()
    return certs


def on_controller(state: Path, now: datetime.datetime) -> list[Cert]:
    """The controller's PKI (state folder pki/*.crt) and its kubeconfigs (the state folder's, kubeconfigs/)."""
    import yaml

    certs = []
    for crt in sorted((state / "pki").glob("*.crt")):
        certs += parse("controller", str(crt), crt.read_text(), now)
    for kubeconfig in sorted([*state.glob("*.kubeconfig"), *(state / "kubeconfigs").glob("*")]):
        try:
            users = (yaml.safe_load(kubeconfig.read_text()) or {}).get("users") or []
        except yaml.YAMLError:
            continue
        for user in users:
            data = (user.get("user") or {}).get("client-certificate-data")
            if data:
                certs += parse("controller", str(kubeconfig), data, now)
    return certs


def endpoints(lab: Lab, machine: str) -> list[tuple[str, str, int]]:
    """What ``machine`` serves over TLS: (label, address, port), the label saying which component on which port."""
    kinds = (["etcd"] if machine in lab.etcd_members else []) + \
            (["control_plane"] if machine in lab.control_plane else []) + \
            (["kubelet"] if machine in lab.nodes else [])
    ports = lab.setting("ports") or {}
    found = []
    for kind in kinds:
        for component, address, port in SERVED[kind]:
            port = ports.get(port) if isinstance(port, str) else port
            address = lab.machine_ip(machine) if address == "node" else address
            found.append((f"served on {address}:{port} ({component})", address, port))
    return found


def served_script(lab: Lab, machine: str) -> str:
    return "; ".join(SERVE_PROBE.format(label=label, address=address, port=port)
                     for label, address, port in endpoints(lab, machine))


def collect(lab: Lab, now: datetime.datetime | None = None) -> list[Cert]:
    """Every certificate of every machine and of the controller, sorted by expiry (the soonest first)."""
    now = now or datetime.datetime.now(datetime.UTC)
    script = GATHER.format(folders=" ".join(NODE_FOLDERS))
    gathered = lab.on_each(lab.machines, lambda node: lab.sh(node, f"{served_script(lab, node)}; {script}"))
    certs = [c for node, text in gathered.items() for c in parse_gathered(node, text, now)]
    certs += on_controller(Path(lab.setting("state_dir") or state_dir()), now)
    return sorted(certs, key=lambda c: (c.days_left, c.machine, c.path))


def where(cert: Cert) -> str:
    """Where a certificate is, as the table and `lab status` show it: machine:path, or the endpoint serving it."""
    if cert.path.startswith("served on "):
        return f"{cert.machine}: {tr(_('served on'))}{cert.path.removeprefix('served on')}"
    return f"{cert.machine}:{cert.path}"


def render(certs: list[Cert]) -> str:
    marks = {"expired": _("EXPIRED"), "soon": _("expires within {days} days").format(days=WARN_DAYS), "ok": ""}
    rows = [(c.not_after[:16].replace("T", " "), f"{c.days_left:.0f}", where(c),
             c.subject + (" [CA]" if c.is_ca else ""), c.issuer, marks[c.state]) for c in certs]
    head = (_("expires (UTC)"), _("days"), _("where"), _("identity"), _("issuer"), "")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r[:5], widths, strict=True)) + ("  " + r[5] if r[5] else "")
             for r in [head, *rows]]
    soon = sum(c.state == "soon" for c in certs)
    expired = sum(c.state == "expired" for c in certs)
    lines.append(_("{count} certificates: {expired} expired, {soon} expire within {days} days").format(
        count=len(certs), expired=expired, soon=soon, days=WARN_DAYS))
    return "\n".join(lines)


def main_certs(lab: Lab, json_file: str | None = None) -> int:
    """Print the table; exit 1 when a certificate has expired. Needs the machines, not the API: expired certificates
    are what may keep the API from answering."""
    certs = collect(lab)
    print(render(certs))
    if json_file:
        Path(json_file).write_text(json.dumps([asdict(c) | {"state": c.state} for c in certs], indent=2) + "\n")
    return 1 if any(c.state == "expired" for c in certs) else 0
