"""How a Python process leaves the job: an orderly exit shuts the runtime
down; an uncaught exception (Ctrl-C included) on one rank of a multi-rank
job aborts the whole job, so that no other rank waits for it forever."""

import atexit
import sys

_installed = False


def install(core):
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(core.shutdown)
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        if not core.is_initialized() or core.size() <= 1:
            return
        # Only the main thread's exceptions end the process; those reach
        # here. Flush what the user printed before the job goes down.
        try:
            sys.stdout.flush()
            sys.stderr.write(
                "[hvdtune] rank %d: uncaught %s; aborting the job so the "
                "other ranks do not wait for this one\n" %
                (core.rank(), exc_type.__name__))
            sys.stderr.flush()
        finally:
            core.abort(1)

    sys.excepthook = hook
