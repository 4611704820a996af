"""The vm target's command-line options (targets/vm/), declared once for
`run`, `ab`, `variants` and `series --run`, and read back from the parsed
arguments as the vm opener's options (targets.open_target); nothing heavy
imported here (`opcost --help` builds every parser)."""

from __future__ import annotations

import re

ACCELS = ("auto", "kvm", "tcg")
MACHINES = ("auto", "microvm", "pc")
RESTORES = ("auto", "off")   # targets/vm/restore.py
# the options that make or size a virtual machine, as (dest, flag); --allow-emulated is
# not one of them: it is about verdicts on emulated results, wherever they come from
MACHINE_OPTIONS = (("kernel", "--kernel"), ("kernel_cmdline", "--kernel-cmdline"), ("vm_cpus", "--vm-cpus"),
                   ("vm_mem", "--vm-mem"), ("vm_procs", "--vm-procs"), ("accel", "--accel"),
                   ("vm_machine", "--vm-machine"), ("vm_cpu", "--vm-cpu"), ("vm_restore", "--vm-restore"))


def add_vm_options(s) -> None:
    """--kernel, --kernel-cmdline, --vm-cpus, --vm-mem, --vm-procs, --accel, --vm-machine, --vm-cpu,
    --vm-restore, --allow-emulated."""
    g = s.add_argument_group("virtual machine (docs/kernels.md)")
    g.add_argument("--kernel", metavar="PATH", help="boot this kernel (bzImage/vmlinuz) in QEMU and run every "
                   "probe process there, one boot each (kernel= in a SPEC or in --a/--b: per variant)")
    g.add_argument("--kernel-cmdline", metavar="ARGS",
                   help="the guest kernel's parameters, plain words (cmdline= per variant)")
    g.add_argument("--vm-cpus", metavar="N", help="guest CPUs (default: 1 when every benchmark of the run runs on "
                   "one CPU, else 2); cpu= means these")
    g.add_argument("--vm-mem", metavar="N", help="guest memory in MiB (default 512)")
    g.add_argument("--vm-procs", metavar="N",
                   help="probe processes of each variant per boot (default 1); the boot is the unit: their "
                   "batches pooled make its figure")
    g.add_argument("--accel", choices=ACCELS, metavar="|".join(ACCELS),
                   help="kvm, tcg (emulated: flagged, no verdict on cost) or auto (default: KVM when a short "
                   "trial boot works, remembered per kernel and host; else TCG)")
    g.add_argument("--vm-machine", choices=MACHINES, metavar="|".join(MACHINES),
                   help="QEMU machine type: microvm (boots fastest), pc, or auto (default: microvm when a first "
                   "boot of the kernel works there, remembered per kernel, host and accel; else pc)")
    g.add_argument("--vm-cpu", metavar="MODEL",
                   help="the CPU the guest believes it has (QEMU's -cpu MODEL: Skylake-Server, EPYC, host under "
                   "KVM; default host under KVM, max under TCG): it decides which mitigation code the kernel runs")
    g.add_argument("--vm-restore", choices=RESTORES, metavar="|".join(RESTORES),
                   help="counting runs under TCG (--counters from QEMU's plugin): auto (default) boots each machine "
                   "once and restores the later rounds from a snapshot of it, waiting for its job; off: a fresh "
                   "boot every round. Timing runs always boot fresh")
    g.add_argument("--allow-emulated", action="store_true",
                   help="give verdicts on emulated (TCG) results too (their timings are QEMU's, not the CPU's)")


def given(args) -> list[str]:
    """The virtual machine's options given on this command line (their flags)."""
    return [flag for dest, flag in MACHINE_OPTIONS if getattr(args, dest, None) is not None]


def wants_vm(args, texts) -> bool:
    """A VM is asked for: --kernel, or kernel=/cmdline= in a SPEC, an arm or --over."""
    return bool(getattr(args, "kernel", None)) or any(
        re.search(r"(^|[:,])\s*(kernel|cmdline)\s*=", t or "") for t in texts)


def from_args(args, texts=()) -> dict | None:
    """The vm opener's options (targets.vm.open_vm) the command line gives,
    or None when it asks for no virtual machine: --kernel, or kernel=/cmdline=
    among `texts` (the SPECs, the arms, --over). The numbers were range-checked
    with every other (protocol.BOUNDS); None: not given, the target's default."""
    if not hasattr(args, "kernel") or not wants_vm(args, list(texts)):
        return None
    return {"kernel": args.kernel, "cmdline": args.kernel_cmdline or "", "cpus": args.vm_cpus,
            "mem_mib": args.vm_mem, "procs": args.vm_procs, "accel": args.accel or "auto",
            "allow_emulated": bool(args.allow_emulated), "machine": getattr(args, "vm_machine", None) or "auto",
            "cpu_model": getattr(args, "vm_cpu", None) or "", "restore": getattr(args, "vm_restore", None) or "auto"}
