"""Provenance stamped on every artefact: what it says in and outside a git checkout."""

from __future__ import annotations

from model_export import provenance


def test_revision_of_this_checkout_names_a_commit():
    revision = provenance.git_revision()
    assert len(revision.commit) == 40 and revision.dirty in (True, False)
    assert revision.label().startswith(revision.commit)


def test_outside_a_checkout_the_revision_is_unknown_not_dirty(monkeypatch, tmp_path):
    monkeypatch.setattr(provenance, "REPO", tmp_path)
    revision = provenance.git_revision()
    assert revision == provenance.GitRevision("unknown", None)
    assert revision.label() == "unknown"


def test_package_versions_say_when_one_is_missing():
    versions = provenance.package_versions(["numpy", "no-such-package-here"])
    assert versions["numpy"][0].isdigit()
    assert versions["no-such-package-here"] == "not installed"


def test_label_marks_a_dirty_tree():
    assert provenance.GitRevision("abc123", True).label() == "abc123-dirty"
    assert provenance.GitRevision("abc123", False).label() == "abc123"


CPUINFO_VM = """processor\t: 0
model name\t: Intel(R) Xeon(R) Processor
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu vme sse2 hypervisor avx2

processor\t: 1
model name\t: Intel(R) Xeon(R) Processor
physical id\t: 0
core id\t\t: 1
flags\t\t: fpu vme sse2 hypervisor avx2
"""
CPUINFO_METAL = CPUINFO_VM.replace(" hypervisor", "").replace("core id\t\t: 1", "core id\t\t: 0")  # one core, 2 threads


def test_the_machines_cpu_as_it_reports_itself():
    assert provenance.physical_cores(CPUINFO_VM) == 2 and provenance.physical_cores(CPUINFO_METAL) == 1
    assert provenance.physical_cores("processor : 0\n") is None  # no core ids (some ARM kernels)
    assert provenance.virtualization(CPUINFO_VM, "kvm") == "kvm"  # systemd-detect-virt's name first
    assert provenance.virtualization(CPUINFO_VM, None) == "a hypervisor"  # else the CPU's hypervisor flag
    assert provenance.virtualization(CPUINFO_METAL, None) == "none"
    assert provenance.virtualization("", None) == "unknown"
    cpu = provenance.machine_cpu()
    assert cpu.model == provenance.cpu_model_name() and cpu.logical and cpu.virtualization
    assert set(cpu.provenance()) == {"cpu_physical_cores", "cpu_virtualization"}
