"""The read path: signals, fusion (RRF, MMR), packing."""
