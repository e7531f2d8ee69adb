"""The commands: once, json, doctor, query, dmon and export, each a view of the engine."""
