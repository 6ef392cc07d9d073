"""`--flops`: FLOPs and bytes per layer counted in one extra pass (`counter`, `op_bytes`), and the
machine's peak FLOP/s and bytes/s (`peak`)."""
