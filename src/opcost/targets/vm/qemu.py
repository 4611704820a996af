"""The QEMU command line of one boot: the machine (kernel and parameters)
and the configuration (CPUs, memory, accelerator, machine type)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .arch import DEFAULT_ARCH, GUEST_ARCHES

QEMU = GUEST_ARCHES[DEFAULT_ARCH].qemu
# cryptomgr.notests: the crypto API's self-tests skipped (a quarter of a second of a boot under TCG; the guest
# encrypts nothing opcost measures)
BASE_CMDLINE = f"console={GUEST_ARCHES[DEFAULT_ARCH].console} panic=-1 quiet cryptomgr.notests"
# Under TCG, where every boot's initcalls cost seconds, these are skipped (initcall_blacklist=): each
# among the slowest of a Debian cloud kernel's boot under TCG (by initcall_debug), none on a path opcost
# measures: kprobe trace events and trace_printk's tracefs files (the guest traces nothing), the KDF
# and BLAKE2s self-tests, the encrypted-keys key type, the X.509 certificates that verify modules (the
# guest loads none). A kernel without one of them (or without kallsyms) ignores its name. Given only
# where it fits the kernel's command line (supervise.speed_params).
TCG_SKIP = ("init_kprobe_trace", "init_trace_printk_function_export", "crypto_kdf108_init", "blake2s_mod_init",
            "init_encrypted", "load_system_certificate_list")
TCG_CMDLINE = "initcall_blacklist=" + ",".join(TCG_SKIP)


def qemu_version(qemu: str) -> str | None:
    try:
        cp = subprocess.run([qemu, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return cp.stdout.splitlines()[0].strip() if cp.returncode == 0 and cp.stdout else None



@dataclass
class Machine:
    """What one guest boots: its kernel and the user's kernel parameters."""
    kernel: Path
    cmdline: str = ""


@dataclass
class VmConfig:
    qemu: str = QEMU
    cpus: int = 2
    mem_mib: int = 512
    accel: str = "auto"
    allow_emulated: bool = False
    procs: int = 1              # probe processes of each variant per boot (--vm-procs)
    machine: str = "auto"       # QEMU machine type: microvm, pc or auto (--vm-machine)
    cpu_model: str = ""         # QEMU's -cpu MODEL (--vm-cpu); "": host under KVM, max under TCG
    plugin: str = ""            # -plugin PATH,ARGS: a counting boot (emucount.py), TCG single-threaded



def qemu_argv(cfg: VmConfig, m: Machine, accel: str, machine_type: str, initrd_fd: int, console_fd: int,
              qmp_fd: int, machine_params: str = "") -> list[str]:
    """QEMU's arguments for one boot; `machine_params`: the kernel parameters
    the machine type needs (clock.machine_cmdline)."""
    cmdline = " ".join(x for x in (BASE_CMDLINE, machine_params, m.cmdline) if x)
    # the data port is the second serial port (ttyS1); microvm makes only the first from -serial
    data = (["-serial", "stdio"] if machine_type != "microvm" else
            ["-chardev", "stdio,id=data", "-device", "isa-serial,chardev=data,index=1"])
    # a counting boot runs every vCPU on one thread: the plugin's one window
    # over all vCPUs is then exact (no two vCPUs add at once)
    accel_arg = "tcg,thread=single" if cfg.plugin and accel == "tcg" else accel
    argv = [cfg.qemu, "-machine", machine_type, "-accel", accel_arg,
            "-cpu", cfg.cpu_model or ("host" if accel == "kvm" else "max"), "-smp", f"{cfg.cpus},sockets=1,cores={cfg.cpus},threads=1",
            "-kernel", str(m.kernel), "-initrd", f"/proc/self/fd/{initrd_fd}", "-append", cmdline,
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-nic", "none",
            "-serial", f"file:/proc/self/fd/{console_fd}", *data,
            "-chardev", f"socket,id=qmp,fd={qmp_fd}", "-mon", "chardev=qmp,mode=control", "-S"]
    if accel == "kvm":   # guest memory allocated and touched before the guest runs
        argv += ["-object", f"memory-backend-ram,id=mem0,size={cfg.mem_mib}M,prealloc=on",
                 "-machine", "memory-backend=mem0", "-m", f"{cfg.mem_mib}M"]
    else:
        argv += ["-m", f"{cfg.mem_mib}M"]
    if cfg.plugin and accel == "tcg":
        argv += ["-plugin", cfg.plugin]
    return argv
