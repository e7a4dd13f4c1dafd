"""The artifacts role's Jinja test, for the roles that install binaries from the controller's cache.

installed_copy_of tells whether a node's file, as ansible.builtin.stat saw it, is an installed copy of a file on
the controller: the same size and modification time (whole seconds), and the mode the roles give binaries. That is
rsync's quick check; the roles install with rsync (ansible.posix.synchronize, which keeps the modification time),
and look at the node's file with a stat that reads no content. So a run that has nothing to install reads no
binary on the nodes (the copy module would read every one to compare checksums, on every run), and an installed
binary is written once and not read back (its pages stay on the kernel's inactive list, the first it reclaims).

    - name: Kube-apiserver | Install the binary
      ansible.posix.synchronize: ...
      when: kube_apiserver_binary.stat is not installed_copy_of(artifacts_files['kube-apiserver'])

The role's plugins are on Ansible's path once the role is loaded: the layer playbooks load it first (nodes.yml
applies it; the others include its facts.yml).
"""

from __future__ import annotations

import os


def installed_copy_of(stat: dict, src: str, mode: str = "0755") -> bool:
    """True when ``stat`` (the ``stat`` key of ansible.builtin.stat's result on the node) describes a copy of the
    controller's file ``src``: it exists with the same size, the same modification time in whole seconds and the
    mode ``mode``. False when either file is missing."""
    if not stat.get("exists"):
        return False
    try:
        source = os.stat(src)
    except FileNotFoundError:
        return False
    return (stat.get("size") == source.st_size
            and int(stat.get("mtime", -1)) == int(source.st_mtime)
            and stat.get("mode") == mode)


class TestModule:
    def tests(self):
        return {"installed_copy_of": installed_copy_of}
