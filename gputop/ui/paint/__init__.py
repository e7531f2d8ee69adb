"""Painting machinery: faster paths through Textual for what the dashboard repaints every tick."""
