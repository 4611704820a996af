import sys

from . import interrupts

interrupts.install()   # before anything else is imported: a Ctrl-C from here on ends cleanly
try:
    from .cli import main
except KeyboardInterrupt:
    interrupts.hold()
    print("opcost: interrupted before anything was measured", file=sys.stderr)
    sys.exit(interrupts.exit_code())

sys.exit(main())
