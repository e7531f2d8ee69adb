"""The fleet: every host and GPU a Prometheus server knows, from gputop exporters and from
plain dcgm-exporter alike (``gputop fleet``).

No Textual and no pynvml here: :mod:`gputop.fleet.client` asks Prometheus's HTTP API (urllib
only), :mod:`gputop.fleet.model` turns the answers into hosts and GPUs, and
:mod:`gputop.fleet.text` renders them as a table, a stuck-process report or JSON.
"""
