"""The engine: NVML and /proc turned into typed snapshots, history, holder scans and safe signals.

Knows nothing of Textual, the commands or the exporter; only the nvml package (and gputop.sim)
touch pynvml.
"""
