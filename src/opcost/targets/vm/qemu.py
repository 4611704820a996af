"""The QEMU command line of one boot: the machine (kernel and parameters)
and the configuration (CPUs, memory, accelerator, machine type)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ...errors import UsageError
from .arch import DEFAULT_ARCH, GUEST_ARCHES, kernel_arch

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
# And these, by the same ranking (benchmarks/vm_boot_phases.py --initcalls; 0.1 s of about 1 s of initcalls):
# two more tracers' setup (blktrace, the function-graph tracer's tracefs files) and the classes of devices
# opcost's guests never have (TPM, NVMe and its protection-information CRC, the VGA arbiter). A second
# initcall_blacklist= (the kernel adds each to its list), given after lpj= where the room is short.
TCG_SKIP_MORE = ("init_blk_tracer", "init_graph_tracefs", "tpm_init", "nvme_core_init", "vga_arb_device_init",
                 "crc64_rocksoft_mod_init")
TCG_CMDLINE_MORE = "initcall_blacklist=" + ",".join(TCG_SKIP_MORE)


def base_cmdline(arch: str) -> str:
    """The kernel parameters opcost gives every guest of `arch` (its console first)."""
    return BASE_CMDLINE.replace(f"console={GUEST_ARCHES[DEFAULT_ARCH].console}",
                                f"console={GUEST_ARCHES[arch].console}")


def qemu_for(cfg_qemu: str, arch: str) -> str:
    """The system emulator that boots `arch`: its own (arch.py), unless
    OPCOST_QEMU named another (cfg.qemu is then not the x86_64 default)."""
    return GUEST_ARCHES[arch].qemu if cfg_qemu == QEMU else cfg_qemu


def qemu_version(qemu: str) -> str | None:
    try:
        cp = subprocess.run([qemu, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return cp.stdout.splitlines()[0].strip() if cp.returncode == 0 and cp.stdout else None



def check_qemu(cfg_qemu: str, arch: str) -> None:
    """UsageError when the QEMU that boots `arch` guests is not installed."""
    program = qemu_for(cfg_qemu, arch)
    if shutil.which(program) is None and not os.path.isfile(program):
        raise UsageError(f"{program} is not installed; install QEMU (Debian: apt-get install "
                         f"{GUEST_ARCHES[arch].qemu_package}) to boot {arch} kernels")


@dataclass
class Machine:
    """What one guest boots: its kernel, the user's kernel parameters and
    the guest's architecture (read from the kernel image, image.kernel_arch)."""
    kernel: Path
    cmdline: str = ""
    arch: str = ""

    def __post_init__(self) -> None:
        if not self.arch:
            self.arch = kernel_arch(self.kernel)


@dataclass
class VmConfig:
    qemu: str = QEMU
    cpus: int = 2
    cpus_auto: bool = False     # neither --vm-cpus nor cpus= said: the run's benchmarks decide (vcpus.cpus_needed)
    cpus_why: str = ""          # with cpus_auto, once decided: why `cpus`
    mem_mib: int = 512
    accel: str = "auto"
    allow_emulated: bool = False
    procs: int = 1              # probe processes of each variant per boot (--vm-procs)
    machine: str = "auto"       # QEMU machine type: microvm, pc or auto (--vm-machine)
    cpu_model: str = ""         # QEMU's -cpu MODEL (--vm-cpu); "": host under KVM, max under TCG
    plugin: str = ""            # -plugin PATH,ARGS: a counting boot (emucount.py), TCG single-threaded
    restore: str = "auto"       # counting boots from a snapshot of the arm's first (restore.py): auto or off (--vm-restore)

    def cpus_said(self) -> str:
        """Why the guests have `cpus` CPUs, in words (recorded with every boot)."""
        if not self.cpus_auto:
            return "given (--vm-cpus, cpus=)"
        return self.cpus_why or f"the default, {self.cpus}: no run decided it"



def qemu_argv(cfg: VmConfig, m: Machine, accel: str, machine_type: str, initrd_fd: int, console_fd: int,
              qmp_fd: int, machine_params: str = "") -> list[str]:
    """QEMU's arguments for one boot; `machine_params`: the kernel parameters
    the machine type needs (clock.machine_cmdline)."""
    arch = GUEST_ARCHES[m.arch]
    cmdline = " ".join(x for x in (base_cmdline(m.arch), machine_params, m.cmdline) if x)
    # the data port: ttyS1 on x86_64 (microvm makes only the first serial port from -serial), else the arch's device
    data = (list(arch.data) if arch.data else ["-serial", "stdio"] if machine_type != "microvm" else
            ["-chardev", "stdio,id=data", "-device", "isa-serial,chardev=data,index=1"])
    # a counting boot runs every vCPU on one thread: the plugin's one window
    # over all vCPUs is then exact (no two vCPUs add at once)
    accel_arg = "tcg,thread=single" if cfg.plugin and accel == "tcg" else accel
    argv = [qemu_for(cfg.qemu, m.arch), "-machine", machine_type, "-accel", accel_arg,
            "-cpu", cfg.cpu_model or arch.cpu[accel], "-smp", f"{cfg.cpus},sockets=1,cores={cfg.cpus},threads=1",
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
