"""Horovod's elastic training (hvd.elastic.run, State, ...) is not part of
hvdtune: importing this module says so."""

raise ImportError(
    "hvdtune.torch.elastic: elastic training is not supported by hvdtune; "
    "run a fixed set of ranks under mpirun and restart the job from a "
    "checkpoint (hvd.broadcast_parameters / broadcast_optimizer_state "
    "bring every rank to the restored state)")
