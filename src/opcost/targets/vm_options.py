"""The vm target's command-line options (targets/vm.py), declared once for
`run` and `ab`; nothing heavy imported here (`opcost --help` builds every
parser)."""

from __future__ import annotations

ACCELS = ("auto", "kvm", "tcg")
MACHINES = ("auto", "microvm", "pc")


def add_vm_options(s) -> None:
    """--kernel, --kernel-cmdline, --vm-cpus, --vm-mem, --vm-procs, --accel, --vm-machine, --allow-emulated."""
    g = s.add_argument_group("virtual machine (docs/kernels.md)")
    g.add_argument("--kernel", metavar="PATH", help="boot this kernel (bzImage/vmlinuz) in QEMU and run every "
                   "probe process there, one boot each (kernel= in a SPEC or in --a/--b: per variant)")
    g.add_argument("--kernel-cmdline", metavar="ARGS", default="",
                   help="the guest kernel's parameters, plain words (cmdline= per variant)")
    g.add_argument("--vm-cpus", metavar="N", help="guest CPUs (default 2); cpu= means these")
    g.add_argument("--vm-mem", metavar="N", help="guest memory in MiB (default 512)")
    g.add_argument("--vm-procs", metavar="N",
                   help="probe processes of each variant per boot (default 1); the boot is the unit: their "
                   "batches pooled make its figure")
    g.add_argument("--accel", choices=ACCELS, default="auto", metavar="|".join(ACCELS),
                   help="kvm, tcg (emulated: flagged, no verdict on cost) or auto (default: KVM when a short "
                   "trial boot works, remembered per kernel and host; else TCG)")
    g.add_argument("--vm-machine", choices=MACHINES, default="auto", metavar="|".join(MACHINES),
                   help="QEMU machine type: microvm (boots fastest), pc, or auto (default: microvm when a first "
                   "boot of the kernel works there, remembered per kernel, host and accel; else pc)")
    g.add_argument("--allow-emulated", action="store_true",
                   help="give verdicts on emulated (TCG) results too (their timings are QEMU's, not the CPU's)")
