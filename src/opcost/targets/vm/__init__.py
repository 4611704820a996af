"""A virtual machine as the target: every probe process runs in a freshly
booted QEMU guest (`qemu-system-x86_64 -kernel K`), whose whole userland is
an initramfs opcost writes itself: a newc cpio of the static init
(probe/vminit/init.c) and the static probe, with the job (which probe
commands to run) as a file in it. No disk, no network, `-no-reboot`: the
init powers the guest off when its job is done; a panic reboots, which
QEMU turns into its exit.

One boot runs one measured probe process (and, first, `opcost-probe cpuid`,
so every process records the CPUID and XCR0 its guest saw): the boot is the
statistical unit, the per-process figures opcost compares are per-boot
figures, and boot-to-boot variation is part of them (docs/kernels.md).

Nothing of a boot is left on disk: the initramfs is a memfd (QEMU opens
/proc/self/fd/N), the console and the data port are pipes, QMP a socket
pair. QEMU dies with opcost (PR_SET_PDEATHSIG, also on SIGKILL of opcost)
and is killed on every way out of a boot (Ctrl-C, SIGTERM, a time limit).

The guest's data port is ttyS1 (kernel messages stay on ttyS0); every line
the init writes there is framed `@OPC <seq> <crc32> <payload>` so garbage is
detected, never parsed as a result.

Acceleration: `tcg` (emulation: every result flagged `emulated`, no verdict
on cost without --allow-emulated), `kvm` (-cpu host, vCPU threads pinned to
host CPUs through QMP query-cpus-fast, QEMU's other threads kept off them,
guest memory preallocated), `auto` (KVM when a short trial boot under it
works, remembered per kernel image and host; else TCG).

Machine type: `microvm` (no PCI, no firmware tables to speak of: the
fastest boot) where the kernel boots there, else `pc`. Under TCG microvm has
no clock to calibrate the TSC against (no HPET, no PM timer, no kvmclock),
so the kernel is told the TSC's frequency (`tsc_early_khz=`, the host's: TCG's
guest TSC is the host's); `auto` boots microvm first and falls back to pc,
the answer remembered per kernel image, host and accel.

The package, one module per concern (docs/architecture.md):
- arch.py: what differs between guest architectures, in one table;
- image.py: the kernel image and parameters, checked before any boot;
- initramfs.py: the guest's userland (the init, the probe, the job);
- qemu.py: QEMU's command line, the machine and the configuration;
- host.py: what the host offers (an invariant TSC, KVM, the cache's key);
- clock.py: the guest's clock under TCG on microvm (the host's TSC rate);
- protocol.py: the init's framed lines, what a boot and its commands did;
- qmp.py: QMP, and pinning the vCPU threads;
- boot.py: one boot of an initramfs, QEMU's life from start to exit;
- choice.py: which accelerator and machine type, as asked or auto's answer,
  and the lpj= a kernel's first boot said;
- supervise.py: a boot as the target asks for it (limits, machine type
  fallback, pinning, the speed parameters under TCG, a failed boot's console
  kept, the boots' tally);
- guest.py: what the guest is (its tables, CPUs, the environment recorded);
- results.py: a boot's commands as the runner's process results, pooled;
- target.py: VmTarget (targets.base.Target): which machine a request boots,
  this session's boots; and its openers;
- preflight.py: each machine booted once before the run, the checks there;
- batch.py: the runs: one boot runs a batch of probe processes;
- withhold.py: no verdict on cost from TCG timings without --allow-emulated.
"""

from __future__ import annotations

from .boot import run_guest
from .choice import KVM_TRIAL_S, MICROVM_TRIAL_S, Choice, cache_dir
from .clock import host_tsc_khz, machine_cmdline
from .host import host_key, host_tsc_invariant, hypervisor_flag, kvm_usable
from .image import check_cmdline, check_kernel, sha256_of
from .initramfs import cpio_newc, guest_files, initramfs, job_text, stripped, vminit_path
from .protocol import FRAME, Boot, BootFailed, Command
from .qemu import BASE_CMDLINE, QEMU, Machine, VmConfig, qemu_argv, qemu_version
from .supervise import BOOT_LIMIT_S, boot, console_dir, save_console, supervised_boot
from .target import MACHINE_PARAMS, VmTarget, open_vm, open_vm_spec
from .withhold import WITHHELD, tcg_emulated, withhold_emulated, withhold_emulated_series

__all__ = ["BASE_CMDLINE", "BOOT_LIMIT_S", "FRAME", "KVM_TRIAL_S", "MACHINE_PARAMS", "MICROVM_TRIAL_S", "QEMU",
           "WITHHELD", "Boot", "BootFailed", "Choice", "Command", "Machine", "VmConfig", "VmTarget", "boot",
           "cache_dir", "check_cmdline", "check_kernel", "console_dir", "cpio_newc", "guest_files", "host_key",
           "host_tsc_invariant", "host_tsc_khz", "hypervisor_flag", "initramfs", "job_text", "kvm_usable",
           "machine_cmdline", "open_vm", "open_vm_spec", "qemu_argv", "qemu_version", "run_guest", "save_console", "sha256_of",
           "stripped", "supervised_boot", "tcg_emulated", "vminit_path", "withhold_emulated", "withhold_emulated_series"]
