from labs.i18n import _
from labs.lab import Lab
from labs.registry import Evidence, check

NODE = ["kubelet", "kube-proxy"]  # and the units of the node's container runtime (lab.runtime_units)


@check(
    "C03", _("The minimal control plane, and kubelet, kube-proxy and a CRI runtime on every node"),
    claim=_("The minimal control plane is etcd, kube-apiserver, kube-scheduler and kube-controller-manager; kubelet "
            "and kube-proxy run on every node, beside a CRI container runtime."),
    texts=["000", "001", "004"],
    see=["lab ssh cp1 -- systemctl status etcd kube-apiserver kube-scheduler kube-controller-manager",
         "lab ssh w1 -- systemctl status kubelet kube-proxy containerd",
         "lab ssh w1 -- 'readlink /proc/$(systemctl show -P MainPID kube-proxy)/exe'",
         "lab ssh w1 -- crictl version"],
    does=_("On each node (and each machine of an external etcd), for each component it should run — the runtime being "
           "the node's own as the settings give it (containerd; CRI-O: crio; Docker Engine: docker and cri-docker) — "
           "the systemd unit is active and its main process executes the component's own binary (a unit that runs "
           "something else does not count), with the version that binary reports; then whether that runtime answers "
           "over CRI on the node's own socket (crictl version)."),
    hints=[
        _("*w1: kube-proxy.service is inactive, its main process none — not kube-proxy*: the unit is stopped or "
          "crashing (`lab ssh w1 -- systemctl status kube-proxy`, `journalctl -u kube-proxy`); a disruptive check "
          "(C25, C27, …) running at the same time stops units for a while. *failed* or *activating* instead of "
          "*inactive*: it keeps exiting."),
        _("*cp1: etcd.service is failed, …*: etcd failed to start — typically a certificate or data-directory problem "
          "(`journalctl -u etcd`); with etcd down the API server fails next."),
        _("*w1: kube-proxy.service is active, its main process pid … /usr/bin/something (kube-proxy.service) — not "
          "kube-proxy*: the unit runs another program (a drop-in in `/etc/systemd/system/kube-proxy.service.d/` that "
          "replaces `ExecStart`: `systemctl cat kube-proxy`)."),
        _("*`crictl version` exited 1*: containerd is down or its socket is not where `/etc/crictl.yaml` says."),
        _("*CRI does not answer: …*, or *… answers over CRI, not …*: another runtime than the node's own (its "
          "settings: profiles.<p>.runtimes) answers on the node's CRI socket."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    for name in lab.machines:  # the nodes, and the machines of an external etcd (which run etcd only)
        snap = lab.snapshot(name)
        programs = {c: c for c in lab.control_plane_components(name)}
        if name in lab.nodes:
            programs |= {c: c for c in NODE} | lab.runtime_units(name)
        for comp, binary in programs.items():
            unit = snap.units.get(comp)
            proc = snap.procs.get(unit.main_pid) if unit and unit.main_pid else None
            ev.expect(unit is not None and unit.state == "active" and proc is not None and proc.binary == binary,
                      _("{name}: {comp}.service active, main process {proc}").format(name=name, comp=comp, proc=proc),
                      _("{name}: {comp}.service is {state}, its main process {proc} — not {comp}").format(
                          name=name, comp=binary, state=unit.state if unit else _("missing"), proc=proc or _("none")))
        versions = lab.sh(name, "; ".join(
            f"echo \"{c}|$(/proc/{snap.units[c].main_pid}/exe --version 2>&1 | head -1)\"" for c in programs
            if c in snap.units and snap.units[c].main_pid))
        ev.add(_("{name}: versions: {versions}").format(
            name=name, versions="; ".join(line.replace("|", ": ", 1) for line in versions.splitlines())))
        if name not in lab.nodes:
            continue
        cri = lab.crictl(name, "version")
        runtime = dict(line.split(":", 1) for line in cri.splitlines() if ":" in line)
        found, wanted = runtime.get("RuntimeName", "").strip(), lab.cri_name(name)
        ev.expect(found == wanted,
                  _("{name}: CRI answers — {runtime} {version}").format(
                      name=name, runtime=found, version=runtime.get("RuntimeVersion", "").strip()),
                  _("{name}: {runtime} answers over CRI, not {wanted}").format(name=name, runtime=found, wanted=wanted)
                  if found else _("{name}: CRI does not answer: {cri}").format(name=name, cri=cri[-200:]))
