"""What the host offers a guest: an invariant TSC, KVM, whether it is itself a guest, and the key under which the
vm target remembers what worked on it."""

from __future__ import annotations

import contextlib
import os
import errno

def host_tsc_invariant() -> bool:
    """The host's TSC runs at a constant rate, also in deep C-states."""
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return {"constant_tsc", "nonstop_tsc"} <= flags
    return False


def kvm_usable() -> str | None:
    """None when /dev/kvm opens read-write, else why not and what to do, in
    one clause: no /dev/kvm (the CPU shows no VMX/SVM: a VM without nested
    virtualisation; or the module is not loaded), no permission."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ENOENT:
            ext = virt_extensions()
            if ext is None or not ext:
                return ("no /dev/kvm: this CPU shows no VMX or SVM (a virtual machine without nested "
                        "virtualisation, or it is off in the firmware), so KVM cannot work here")
            return (f"no /dev/kvm although the CPU has {'/'.join(ext)}: load KVM "
                    f"(modprobe {'kvm_intel' if 'vmx' in ext else 'kvm_amd'})")
        if e.errno in (errno.EACCES, errno.EPERM):
            return ("no permission to open /dev/kvm: add this user to its group "
                    "(sudo usermod -aG kvm $USER, then log in again)")
        return f"/dev/kvm cannot be opened ({e.strerror})"
    os.close(fd)
    return None


def virt_extensions() -> list[str] | None:
    """The hardware virtualisation the CPU shows (/proc/cpuinfo: vmx, svm), or None if unknown."""
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return sorted(flags & {"vmx", "svm"})
    return None


def host_key(qemu_ver: str | None) -> str:
    u = os.uname()
    model = ""
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{u.nodename}|{u.release}|{model}|{qemu_ver}"




def hypervisor_flag() -> bool | None:
    """The host's CPUID hypervisor bit as /proc/cpuinfo shows it: a nested guest says so."""
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return " hypervisor" in line or line.rstrip().endswith("hypervisor")
    return None
