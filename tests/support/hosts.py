"""Hosts made of Linux network namespaces: each with its own address on one bridge, as separate machines.

`hosts("srv", "master", "w1", "w2")` creates, for the test's lifetime, a bridge in the root
namespace (10.231.<n>.1/24) and per name a namespace joined to it by a veth pair, with its own
address (10.231.<n>.2, .3, ...) and its loopback up. A process started with `host.run_prefix`
runs inside it: it binds and connects as that host, and reaches the others only through the
bridge, so cutting a host's link (`cut`) cuts it off like an unplugged cable.

Needs root and `ip` (iproute2); `available()` says whether this machine allows it, and the tests
skip otherwise. Names are prefixed with this process's id, so parallel runs do not collide.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def available() -> str:
    """"" when network namespaces can be made here; else why not."""
    if shutil.which("ip") is None:
        return "no `ip` (iproute2)"
    if os.geteuid() != 0:
        return "not root"
    probe = f"mnbprobe{os.getpid() % 100000}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if done.returncode != 0:
        return f"ip netns add failed: {done.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ""


@dataclass(frozen=True)
class Host:
    name: str
    namespace: str
    address: str
    host_link: str  # the veth end on the bridge, in the root namespace

    @property
    def run_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.namespace]

    def cut(self) -> None:
        """Unplug this host: its link to the bridge goes down."""
        ip("link", "set", self.host_link, "down")


@contextmanager
def hosts(*names: str) -> Iterator[dict[str, Host]]:
    tag = str(os.getpid() % 100000)
    subnet = f"10.231.{os.getpid() % 200 + 20}"
    bridge = f"mnb{tag}br"
    made: dict[str, Host] = {}
    try:
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", f"{subnet}.1/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        for index, name in enumerate(names, start=2):
            host = Host(name, f"mnb{tag}-{name}", f"{subnet}.{index}", f"mnb{tag}h{index}")
            inner = f"mnb{tag}n{index}"
            ip("netns", "add", host.namespace)
            made[name] = host
            ip("link", "add", host.host_link, "type", "veth", "peer", "name", inner)
            ip("link", "set", host.host_link, "master", bridge, "up")
            ip("link", "set", inner, "netns", host.namespace)
            ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", inner)
            ip("-n", host.namespace, "link", "set", inner, "up")
            ip("-n", host.namespace, "link", "set", "lo", "up")
        yield made
    finally:
        for host in made.values():
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True)
            subprocess.run(["ip", "link", "del", host.host_link], capture_output=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)
