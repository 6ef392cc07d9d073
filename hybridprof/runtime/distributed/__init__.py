"""One rank of a torchrun run: the process group, gathering sessions to rank 0, failures
(`rank`), and the DDP communication hook that times each gradient bucket (`ddp_hook`)."""
