"""The Prometheus exporter: metrics as plain data, prometheus_client glue, the HTTP server."""
